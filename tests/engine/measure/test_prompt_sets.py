"""Prompt files and the built-in sets: formats, limits, and messages a person can act on."""

from __future__ import annotations

import json

import pytest

from engine.measure import prompt_sets
from engine.measure.prompt_sets import (
    BUILTIN_SETS,
    Prompt,
    PromptFileError,
    builtin,
    load_source,
    parse_prompts,
)
from engine.training import corpus


@pytest.mark.parametrize("name", [n for n in BUILTIN_SETS if n != "lookup"])
def test_builtin_sets_hold_24_distinct_prompts_of_one_domain(name):
    prompts = builtin(name)
    assert len(prompts) >= 24
    assert len({p.text for p in prompts}) == len(prompts)
    assert {p.domain for p in prompts} == {name}
    assert all(p.text.strip() for p in prompts)


def split_restart(text: str) -> tuple[str, str]:
    """A restating prompt's passage, and the start of it that follows it again."""
    heading = text.split("\n", 1)[0]
    cut = text.rindex("\n\n" + heading + "\n")
    return text[:cut], text[cut + 2 :]


def test_the_lookup_set_restates_what_its_prompts_hold():
    prompts = builtin("lookup")
    domains = {"lookup-scripture", "lookup-jargon", "lookup-python"}
    assert {p.domain for p in prompts} == domains
    assert all(sum(p.domain == d for p in prompts) == 16 for d in domains)
    assert len({p.text for p in prompts}) == len(prompts)
    for p in prompts:
        if p.domain == "lookup-python":
            before, after = p.text.split("\n\n# after: ")
            assert before.startswith("# before\n")
        else:  # the passage, then its heading and first words again
            passage, restart = split_restart(p.text)
            assert passage.startswith(restart) and len(passage) > 2 * len(restart)


def test_the_lookup_set_takes_passages_from_heldout_documents_only(monkeypatch, tmp_path):
    from engine.training import build_lookup

    fake = [corpus.Corpus("kjv", ["Train 1\n\n1 never " * 40],
                          [f"Held {i}\n\n1 kept words " + "more words " * 80 for i in range(40)]),
            corpus.Corpus("jargon", [":train: " * 40], [f":held{i}:\n\nsome text " * 20
                                                         for i in range(20)])]
    monkeypatch.setattr(build_lookup, "load_domains", lambda: fake)
    monkeypatch.setattr(build_lookup, "HERE", tmp_path)
    (tmp_path / "python.jsonl").write_text(
        json.dumps({"text": "def area(r):\n    return 3.14 * r * r\n"}) + "\n"
        + json.dumps({"text": "for x in xs:\n    print(x)\n"}) + "\n")
    build_lookup.main()
    items = [json.loads(line) for line in (tmp_path / "lookup.jsonl").read_text().splitlines()]
    scripture = [i["text"] for i in items if i["domain"] == "lookup-scripture"]
    assert len(scripture) == build_lookup.PER_DOMAIN
    assert all(t.startswith("Held ") and "never" not in t for t in scripture)
    assert all(t.count("1 kept words") == 2 for t in scripture)
    assert all(len(t) <= 2 * build_lookup.PASSAGE_CHARS for t in scripture)
    python = [i["text"] for i in items if i["domain"] == "lookup-python"]
    assert python[0].endswith("renamed to area_v2\ndef area_v2(r):\n")
    assert python[1].endswith("# after: the same code, tidied\nfor x in xs:\n")


def test_heldout_sets_come_from_heldout_documents_only(monkeypatch, tmp_path):
    """The builder takes prompts from ``Corpus.heldout`` and never from ``train``."""
    from engine.training import build_heldout

    fake = [corpus.Corpus("kjv", [f"train {i} " * 30 for i in range(40)],
                          [f"held {i} " * 30 for i in range(50)]),
            corpus.Corpus("jargon", ["train"], [f":held{i}: " * 40 for i in range(10)])]
    monkeypatch.setattr(build_heldout, "load_domains", lambda: fake)
    monkeypatch.setattr(build_heldout, "SETS_DIR", tmp_path)
    build_heldout.main()
    kjv = [json.loads(line) for line in (tmp_path / "scripture.jsonl").read_text().splitlines()]
    assert len(kjv) == build_heldout.PROMPTS_PER_SET
    assert all(item["text"].startswith("held ") and item["domain"] == "scripture" for item in kjv)
    assert all(len(item["text"]) <= corpus.PROMPT_CHARS for item in kjv)
    jargon = (tmp_path / "jargon.jsonl").read_text().splitlines()
    assert len(jargon) == 10  # fewer held-out documents than asked for: all of them


def test_shipped_heldout_sets_match_the_training_split():
    """Needs the Debian corpora, which ``make test`` installs (``make corpora``)."""
    try:
        corpora = {c.domain: c for c in corpus.load_domains()}
    except corpus.CorpusMissing as missing:
        pytest.fail(f"needs the Debian corpora (`make corpora` installs them): {missing}")
    for domain, name in (("kjv", "scripture"), ("jargon", "jargon")):
        heldout = corpora[domain].heldout
        train_starts = {d[:160] for d in corpora[domain].train}
        for p in builtin(name):
            assert any(d.startswith(p.text) for d in heldout), p.text[:60]
            assert p.text[:160] not in train_starts
        for p in builtin("lookup"):
            if p.domain == f"lookup-{name}":
                passage = split_restart(p.text)[0]
                assert any(d.startswith(passage) for d in heldout), passage[:60]


def test_jsonl_with_and_without_domain():
    data = b'{"text": "def f(x):\\n    return", "domain": "code"}\n\n{"text": "hello"}\n'
    assert parse_prompts(data, "mine") == [Prompt("def f(x):\n    return", "code"),
                                           Prompt("hello", "mine")]


def test_plain_text_is_one_prompt_per_line_and_skips_blank_lines():
    data = b"first prompt\n\n  second prompt  \r\nthird\n"
    assert [p.text for p in parse_prompts(data, "d")] == ["first prompt", "second prompt", "third"]


def test_utf8_with_bom_is_read():
    assert parse_prompts("\ufeffcafé\n".encode(), "d") == [Prompt("café", "d")]


@pytest.mark.parametrize(
    "data,limits,message",
    [
        (b"", {}, "holds no prompts"),
        (b"\n  \n\t\n", {}, "holds no prompts"),
        ("caf\xe9".encode("latin-1"), {}, "not UTF-8 text (byte 0xe9 at offset 3)"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", {}, "not UTF-8"),
        (b"abc\x00def", {}, "NUL bytes"),
        (b"x" * 2000, {"max_bytes": 1024}, "is 2 KB; the limit is 1 KB"),
        (b"a\nb\nc\n", {"max_prompts": 2}, "holds 3 prompts; the limit is 2"),
        (b'{"text": "ok"}\n{"text": broken\n', {}, "line 2 is not valid JSON"),
        (b'{"text": "ok"}\n["a list"]\n', {}, "line 2: expected an object"),
        (b'{"prompt": "wrong key"}\n', {}, '"text" must be a non-empty string'),
        (b'{"text": "   "}\n', {}, '"text" must be a non-empty string'),
        (b'{"text": "ok", "domain": 7}\n', {}, '"domain" must be a non-empty string'),
        (b'{"text": "ok", "domain": "' + b"d" * 41 + b'"}\n', {}, "at most 40 characters"),
        # JSON escapes a lone half of a surrogate pair, which no UTF-8 text can hold
        (b'{"text": "ok"}\n{"text": "ok", "domain": "a\\ud800"}\n', {},
         'line 2: "domain" holds a lone surrogate (\\ud800)'),
        (b'{"text": "a \\udfff b"}\n', {}, 'line 1: "text" holds a lone surrogate (\\udfff)'),
    ],
)
def test_bad_files_get_a_clear_message(data, limits, message):
    with pytest.raises(PromptFileError) as error:
        parse_prompts(data, "d", name="prompts.txt", **limits)
    assert message in str(error.value)
    assert str(error.value).startswith("prompts.txt")


def test_a_surrogate_pair_in_json_escapes_is_one_character():
    [prompt] = parse_prompts(b'{"text": "rocket \\ud83d\\ude80"}\n', "d")
    assert prompt.text == "rocket \U0001f680"


def test_load_source_takes_a_set_name_or_a_path(tmp_path):
    path = tmp_path / "support_tickets.txt"
    path.write_text("my order never arrived\n", encoding="utf-8")
    assert load_source(str(path)) == [Prompt("my order never arrived", "support_tickets")]
    assert load_source("python") == builtin("python")
    with pytest.raises(PromptFileError, match="no such file, and not a built-in set"):
        load_source(str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match="no built-in prompt set"):
        builtin("klingon")


def test_builtin_files_are_package_data():
    for name in BUILTIN_SETS.values():
        assert (prompt_sets.HERE / name).is_file()
