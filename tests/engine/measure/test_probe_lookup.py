"""The probe with prompt lookup, and both drafters side by side (``--drafter model,ngram``)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engine import cli
from engine.analytic import lookup as lookup_model
from engine.decoder.ngram import PromptLookup
from engine.measure import probe_compare
from engine.measure.probe import ProbeConfig, markdown, plan, probe, summarize_probe
from engine.measure.prompt_sets import Prompt

# Prompts that repeat themselves: lookups match.
PROMPTS = [Prompt("the quick brown fox jumps over the lazy dog and the quick brown", "animals"),
           Prompt("the cat sat on the mat and the cat sat on", "animals"),
           Prompt("speculative decoding drafts and speculative decoding", "decoding"),
           Prompt("verifies them with a large one and verifies them with a", "decoding")]
CONFIG = ProbeConfig(k=3, temperatures=[0.0, 1.0], max_new_tokens=16, seed=3, bootstrap=200)
LOOKUP = PromptLookup(1, 2)


def run(pair, config):
    measures = list(probe(pair, PROMPTS, config))
    return summarize_probe(measures, config, engine="specscope", target="t", draft="d",
                           runs_planned=len(plan(PROMPTS, config))), measures


@pytest.fixture(scope="module")
def ngram(target_only_pair):
    return run(target_only_pair, replace(CONFIG, lookup=LOOKUP))


@pytest.fixture(scope="module")
def model(good_pair):
    return run(good_pair, CONFIG)[0]


def test_lookup_rows_count_proposed_tokens_and_their_share(ngram):
    result, measures = ngram
    assert result.drafter == "ngram" and result.lookup == {"prompt_lookup_min": 1,
                                                           "prompt_lookup_max": 2}
    for row in result.rows:
        group = [m for m in measures if (m.domain, m.temperature) == (row.domain, row.temperature)]
        cycles = sum(m.cycles for m in group)
        proposing = sum(m.proposing for m in group)
        assert row.drafter == "ngram" and 0 < proposing <= cycles
        assert row.proposal_share == proposing / cycles
        assert row.drafted == sum(sum(i * n for i, n in enumerate(m.proposal_lengths))
                                  for m in group)
        assert row.proposed_per_cycle == row.drafted / proposing
        assert row.alpha_counted == row.accepted / row.trials
        # c prices one lookup a cycle, not a model's step per draft token
        assert all(len(m.draft_step_ms) == m.cycles for m in group)
        lengths = [sum(m.proposal_lengths[i] for m in group) for i in range(4)]
        assert row.speedup_predicted == pytest.approx(lookup_model.speedup(
            row.alpha_counted, 3, row.proposal_share, row.c, row.v, lengths))
        assert (row.best_k, row.best_speedup) == lookup_model.best_k(
            row.alpha_counted, row.proposal_share, row.c, row.v, 3)
    assert "prompt lookup (prompt_lookup_min 1, prompt_lookup_max 2)" in markdown(result)


def test_lookup_acceptance_has_one_base_the_cycles_with_a_proposal(ngram):
    """Acceptance at position i over the cycles that proposed at least i, as alpha counts
    it; not over every cycle, which sets the cycles without a proposal against alpha^i."""
    result, measures = ngram
    for row in result.rows:
        group = [m for m in measures if (m.domain, m.temperature) == (row.domain, row.temperature)]
        assert sum(sum(m.histogram) for m in group) == sum(m.proposing for m in group)
        offered = [sum(m.offered[i] for m in group) for i in range(3)]
        taken = [sum(m.taken[i] for m in group) for i in range(3)]
        assert offered[0] == sum(m.proposing for m in group)
        assert row.per_position_acceptance == [t / o if o else None
                                               for t, o in zip(taken, offered, strict=True)]


def test_side_by_side_names_a_winner_per_domain_and_temperature(model, ngram):
    rows = probe_compare.compare(model, ngram[0])
    assert [(r.domain, r.temperature) for r in rows] == [
        (r.domain, r.temperature) for r in model.rows]
    for r in rows:
        # no estimate (never proposed): plain decoding, 1x
        m, n = (1.0 if x is None else x for x in (r.model.best_speedup, r.ngram.best_speedup))
        if max(m, n) > 1:
            assert r.winner == ("ngram" if n > m else "model")
            assert r.ratio == pytest.approx(max(m, n) / min(m, n))
        else:
            assert r.winner is None
    text = probe_compare.markdown(model, ngram[0], "specscope probe --drafter model,ngram")
    assert text.count("\n| animals |") == 2 and "wins" in text
    data = probe_compare.comparison_json(model, ngram[0])
    never = replace(ngram[0].rows[0], best_k=None, best_speedup=None, alpha_counted=None)
    alone = probe_compare.compare(replace(model, rows=[replace(model.rows[0], best_speedup=1.3)]),
                                  replace(ngram[0], rows=[never]))
    assert (alone[0].winner, alone[0].ratio) == ("model", pytest.approx(1.3))
    assert set(data["drafters"]) == {"model", "ngram"} and len(data["comparison"]) == len(rows)


def test_cli_probe_with_both_drafters(capsys, model_dirs, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"text": p.text, "domain": p.domain})
                                 for p in PROMPTS[:2]) + "\n")
    argv = ["probe", str(prompts), "--target", model_dirs["target"], "--draft",
            model_dirs["good"], "--device", "cpu", "--k", "2", "--temperatures", "0",
            "--max-new-tokens", "8", "--bootstrap", "50", "--drafter", "model,ngram",
            "--prompt-lookup-min", "1", "--prompt-lookup-max", "2", "--quiet", "--json"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["drafters"]["ngram"]["drafter"] == "ngram"
    assert out["drafters"]["model"]["drafter"] == "model"
    assert out["comparison"][0]["domain"] == "animals"


def test_cli_probe_with_prompt_lookup_alone_loads_no_draft(capsys, model_dirs, tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text(PROMPTS[0].text + "\n")
    argv = ["probe", str(prompts), "--target", model_dirs["target"], "--draft", "/nowhere",
            "--device", "cpu", "--k", "2", "--temperatures", "0", "--max-new-tokens", "8",
            "--bootstrap", "20", "--drafter", "ngram", "--quiet"]
    assert cli.main(argv) == 0  # the draft path is never read
    out = capsys.readouterr().out
    assert "prompt lookup (prompt_lookup_min 2, prompt_lookup_max 4)" in out
    assert "share of cycles with a proposal: p T=0:" in out


@pytest.mark.parametrize(("extra", "message"), [
    (["--drafter", "lookahead"], "--drafter takes model, ngram, eagle, medusa"),
    (["--drafter", "ngram", "--prompt-lookup-min", "3", "--prompt-lookup-max", "2"],
     "must not exceed"),
])
def test_cli_probe_refuses_bad_drafter_settings(capsys, model_dirs, extra, message):
    argv = ["probe", "python", "--target", model_dirs["target"], "--device", "cpu", *extra]
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err
