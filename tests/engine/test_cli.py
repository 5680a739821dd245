import json

import pytest

from engine import cli
from engine.cli import commands
from engine.decoder.events import GenerationConfig


def generate(capsys, model_dirs, *extra: str, draft: str = "good"):
    argv = ["generate", "the quick brown fox", "--target", model_dirs["target"]]
    argv += ["--draft", model_dirs[draft], "--device", "cpu", "--max-new-tokens", "12", *extra]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_json_prints_one_object_per_cycle_and_one_summary(capsys, model_dirs):
    code, out, _ = generate(capsys, model_dirs, "--json", "--k", "3", "--seed", "1")
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[-2:] == ["summary", "done"] and set(kinds[:-2]) == {"cycle"}
    summary, done = events[-2], events[-1]
    assert summary["k"] == 3 and summary["tokens"] == len(done["token_ids"]) <= 12
    assert summary["speedup_measured"] > 0 and summary["speedup_predicted"] > 0
    assert {t["kind"] for e in events[:-2] for t in e["tokens"]} <= {
        "accepted",
        "rejected",
        "discarded",
        "target",
    }


def test_text_with_colours_and_the_summary(capsys, model_dirs):
    code, out, _ = generate(
        capsys,
        model_dirs,
        "--color",
        "always",
        "--temperature",
        "1.0",
        "--top-p",
        "0.95",
        draft="bad",
    )
    assert code == 0
    assert out.startswith("the quick brown fox")
    assert commands.STYLES["accepted"] in out and commands.STYLES["target"] in out
    assert commands.STYLES["rejected"] in out  # a bad draft is rejected now and then
    for label in ("alpha", "draft acceptance rate", "mean acceptance length", "c = ", "speedup"):
        assert label in out


def test_without_colour_only_the_output_text_is_printed(capsys, model_dirs):
    code, out, _ = generate(capsys, model_dirs, "--color", "never", "--temperature", "0")
    assert code == 0 and "\033[" not in out and "summary (k = 4)" in out


def test_no_draft_runs_the_target_alone(capsys, model_dirs):
    code, out, _ = generate(capsys, model_dirs, "--no-draft", "--json", "--temperature", "0")
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [e["event"] for e in events] == ["step"] * 12 + ["done"]
    assert events[-1]["mode"] == "target-only"
    assert [e["token"]["id"] for e in events[:-1]] == events[-1]["token_ids"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--k", "0"], "k (draft tokens per cycle)"),
        (["--temperature", "-1"], "temperature"),
        (["--top-p", "1.5"], "top-p"),
        (["--max-new-tokens", "100000"], "over the configured limit"),
    ],
)
def test_bad_arguments_exit_with_a_clear_message(capsys, model_dirs, extra, message):
    code, out, err = generate(capsys, model_dirs, *extra)
    assert code == 2 and message in err and out == ""


def test_a_mismatched_pair_exits_with_a_clear_message(capsys, model_dirs):
    code, _, err = generate(capsys, model_dirs, draft="foreign")
    assert code == 2 and "do not share a tokenizer" in err


def test_pair_device_and_graphs_come_from_settings(monkeypatch):
    monkeypatch.setenv("SPECSCOPE_PAIRS", '{"other": {"target": "/t", "draft": "/d"}}')
    monkeypatch.setenv("SPECSCOPE_DEFAULT_PAIR", "other")
    monkeypatch.setenv("SPECSCOPE_DEVICE", "cpu")
    monkeypatch.setenv("SPECSCOPE_CUDA_GRAPHS", "1")
    args = cli.build_parser(cli.defaults()).parse_args(["generate", "hi"])
    assert (args.target, args.draft, args.device, args.cuda_graphs) == ("/t", "/d", "cpu", True)


def test_generation_defaults_are_the_engines():
    args = cli.build_parser(cli.defaults()).parse_args(["generate", "hi"])
    expected = GenerationConfig(prompt="hi")
    assert (args.k, args.temperature, args.top_p, args.top_k, args.max_new_tokens, args.seed) == (
        expected.k, expected.temperature, expected.top_p, expected.top_k,
        expected.max_new_tokens, expected.seed)


def test_the_summary_prints_n_a_for_an_estimate_without_data():
    from dataclasses import replace

    from engine.cli.commands import format_summary
    from engine.decoder.events import CycleEvent
    from engine.decoder.stats import summarize

    cycle = CycleEvent(index=0, tokens=[], draft_ms=2.0, verify_ms=2.0, cycle_ms=4.5, k=2,
                       n_accepted=1, rejected=True, draft_step_ms=[1.0, 1.0],
                       overlap=[0.9, 0.1], n_emitted=2)
    summary = replace(summarize([cycle], [4.0]), alpha_counted=None, speedup_predicted=None,
                      per_position_acceptance=[1.0, None])
    text = format_summary(summary)
    assert "counted n/a (1/2)" in text and "predicted n/a" in text
    assert "per-position accepted  1.00 n/a" in text


def test_the_summary_prints_the_check_of_independent_acceptance():
    from engine.cli.commands import format_summary
    from engine.decoder.events import CycleEvent
    from engine.decoder.stats import summarize

    def cycle(accepted: int) -> CycleEvent:
        return CycleEvent(index=0, tokens=[], draft_ms=4.0, verify_ms=2.0, cycle_ms=6.0, k=4,
                          n_accepted=accepted, rejected=accepted < 4, draft_step_ms=[1.0] * 4,
                          overlap=[0.9] * (accepted + (accepted < 4)), n_emitted=accepted + 1)

    summary = summarize([cycle(0)] * 45 + [cycle(1)] * 5 + [cycle(4)] * 50, [4.0])
    text = format_summary(summary)
    assert (f"from the lengths       {summary.speedup_from_histogram:.3f}x predicted; "
            f"chi2 {summary.geometric_chi2:.1f}, df 3, p < 0.0001 against the geometric "
            "(cycles taken as independent)") in text
