"""The probe through vLLM: one prompt's counters as a measure, the warning when vLLM accepts far
fewer drafts than our engine, the flow that probes vLLM and then our engine (the command's and
the page's), and ``specscope probe --engine vllm`` against the stand-in server."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engine import cli
from engine.measure.probe import ProbeConfig, PromptMeasure, plan, summarize_probe
from engine.measure.prompt_sets import Prompt
from engine.serving.client import VllmError
from engine.serving.metrics import SpecCounters
from engine.serving.probe import (
    NOT_AVAILABLE,
    acceptance_warnings,
    beyond_noise,
    probe_and_compare,
    prompt_measure,
)


def test_counters_around_one_prompt_become_its_cycles_histogram_and_trials():
    # 5 cycles at k = 3: 4 accepted position 0, 2 position 1, 1 all three.
    counts = SpecCounters(drafts=5, draft_tokens=15, accepted=7, per_position=[4, 2, 1])
    m = prompt_measure(counts, 3, "code", 0.7, 2, tokens=12)
    assert (m.cycles, m.accepted, m.drafted) == (5, 7, 15)
    assert m.histogram == [1, 2, 1, 1]  # exactly 0, 1, 2, 3 accepted
    assert sum(a * n for a, n in enumerate(m.histogram)) == m.accepted
    assert m.trials == 7 + 5 - 1  # every cycle's rejection, except the one that took all 3
    assert m.verified == 0  # no distributions through vLLM: no expected alpha


@pytest.mark.parametrize("counts", [
    SpecCounters(drafts=2, draft_tokens=8, accepted=3, per_position=[1, 2, 0, 0]),  # rises
    SpecCounters(drafts=2, draft_tokens=8, accepted=5, per_position=[2, 1, 0, 0]),  # sum != 5
    SpecCounters(drafts=2, draft_tokens=6, accepted=3, per_position=[2, 1, 0, 0]),  # k = 3
    SpecCounters(drafts=1, draft_tokens=4, accepted=2, per_position=[2, 0, 0, 0]),  # > drafts
])
def test_inconsistent_counters_are_a_clear_error(counts):
    with pytest.raises(VllmError, match="changed inconsistently .* other requests"):
        prompt_measure(counts, 4, "code", 1.0, 0, tokens=8)


def test_prompt_lookup_counters_give_rates_but_no_counted_alpha():
    """vLLM's ngram: 3 proposing steps of 4, 2 and 1 tokens (7 draft tokens) accepting 2, 1
    and 0; a 16-token output is 1 prefill token, 3 proposing steps with 3 accepted tokens and
    16 - 1 - 3 - 3 = 9 steps that proposed nothing. The trials of short proposals are unknown
    (no per-position draft counts), so there is no counted alpha."""
    from engine.decoder.ngram import PromptLookup

    counts = SpecCounters(drafts=3, draft_tokens=7, accepted=3, per_position=[2, 1, 0, 0])
    m = prompt_measure(counts, 4, "code", 0.0, 0, tokens=16, lookup=True)
    assert (m.proposing, m.cycles, m.drafted, m.trials) == (3, 12, 7, 0)
    # the same counters from a draft model's server would not add up (7 != 3 x 4)
    with pytest.raises(VllmError, match="changed inconsistently"):
        prompt_measure(counts, 4, "code", 0.0, 0, tokens=16)
    config = ProbeConfig(k=4, temperatures=[0.0], bootstrap=20, lookup=PromptLookup())
    row = summarize_probe([m], config, engine="vllm", target="t", draft="",
                          runs_planned=1).rows[0]
    assert row.alpha_counted is None and row.drafter == "ngram"
    assert row.draft_acceptance_rate == pytest.approx(3 / 7)
    assert row.mean_acceptance_length == pytest.approx(2.0)
    assert row.proposal_share == pytest.approx(3 / 12)


def test_more_draft_tokens_than_k_per_proposal_is_refused_for_lookup_too():
    counts = SpecCounters(drafts=1, draft_tokens=5, accepted=1, per_position=[1, 0, 0, 0])
    with pytest.raises(VllmError, match="changed inconsistently"):
        prompt_measure(counts, 4, "code", 0.0, 0, tokens=8, lookup=True)


def result(engine: str, rate_by_temperature: dict[float, tuple[int, int]]):
    """A probe result with one prompt per temperature: (accepted, drafted) of k = 4."""
    measures = []
    for t, (accepted, cycles) in rate_by_temperature.items():
        per_position = [min(cycles, max(0, accepted - i * cycles)) for i in range(4)]
        counts = SpecCounters(drafts=cycles, draft_tokens=4 * cycles, accepted=accepted,
                              per_position=per_position)
        measures.append(prompt_measure(counts, 4, "prose", t, 0, tokens=accepted + cycles))
    config = ProbeConfig(k=4, temperatures=list(rate_by_temperature), bootstrap=20)
    return summarize_probe(measures, config, engine=engine, target="t", draft="d",
                           runs_planned=len(measures))


def test_a_far_lower_acceptance_than_ours_is_named_with_both_rates():
    vllm = result("vllm", {0.0: (60, 20), 1.0: (8, 20)})  # 75% and 10% of 80 drafts
    ours = result("specscope", {0.0: (60, 20), 1.0: (40, 20)})  # 75% and 50%
    warnings = acceptance_warnings(vllm, ours)
    assert len(warnings) == 1
    assert "prose at T = 1: vLLM accepted 10% of draft tokens" in warnings[0]
    assert "specscope's engine accepts 50%" in warnings[0]


@pytest.mark.parametrize("theirs,mine", [(36, 40), (2, 3)])  # close; or both near zero
def test_close_or_tiny_differences_are_not_warned_about(theirs, mine):
    vllm, ours = result("vllm", {1.0: (theirs, 20)}), result("specscope", {1.0: (mine, 20)})
    assert acceptance_warnings(vllm, ours) == []


def test_a_gap_a_few_cycles_can_show_by_chance_is_not_warned_about():
    """2 cycles each: 0 of 8 drafts against 5 of 8 is under half and 0.62 lower, but 0 of 2
    trials against 5 of 7 is within 3 standard errors (z = 1.8). Ten times the cycles with
    the same rates is not (z = 5.7)."""
    vllm, ours = result("vllm", {1.0: (0, 2)}), result("specscope", {1.0: (5, 2)})
    assert acceptance_warnings(vllm, ours) == []
    vllm, ours = result("vllm", {1.0: (0, 20)}), result("specscope", {1.0: (50, 20)})
    assert len(acceptance_warnings(vllm, ours)) == 1


def test_beyond_noise_is_the_two_proportion_z_test_at_3():
    assert beyond_noise(10, 100, 60, 100)  # z = 7.4
    assert not beyond_noise(45, 100, 60, 100)  # z = 2.1
    assert not beyond_noise(0, 0, 5, 10)  # nothing measured
    assert not beyond_noise(0, 10, 0, 10) and not beyond_noise(10, 10, 10, 10)


def probe_vllm(capsys, model_dirs, url: str, *extra: str):
    argv = ["probe", "--engine", "vllm", "--url", url, "--target", model_dirs["target"],
            "--draft", model_dirs["good"], "--device", "cpu", "--max-new-tokens", "6",
            "--k", "4", "--bootstrap", "50", "--quiet", "--temperatures", "0,1", *extra]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_probe_through_vllm_reports_its_counters_by_domain_and_temperature(
        capsys, model_dirs, fake_server):
    server = fake_server("serve")  # each completion: one cycle accepting 2 of 4
    code, out, _ = probe_vllm(capsys, model_dirs, server.url, "python", "--max-prompts", "2",
                              "--json")
    assert code == 0
    report = json.loads(out)
    assert report["engine"] == "vllm"
    rows = report["rows"]
    assert [(r["domain"], r["temperature"], r["prompts"]) for r in rows] == [
        ("python", 0.0, 2), ("python", 1.0, 2)]
    for r in rows:
        assert (r["cycles"], r["accepted"], r["drafted"]) == (2, 4, 8)
        assert r["draft_acceptance_rate"] == 0.5 and r["mean_acceptance_length"] == 3.0
        assert r["per_position_acceptance"] == [1.0, 1.0, 0.0, 0.0]
        assert r["alpha_counted"] == pytest.approx(4 / 6)  # 2 accepted + 1 rejected a cycle
        assert r["alpha_expected"] is None and r["c"] is None
    assert any("sum-min α (expected α)" in n and "n/a" in n for n in report["notices"])
    # Then the same prompts through our engine, for the comparison.
    assert report["reference"]["engine"] == "specscope"
    assert len(report["reference"]["rows"]) == 2


def test_markdown_says_what_vllm_cannot_give(capsys, model_dirs, fake_server):
    server = fake_server("serve")
    code, out, _ = probe_vllm(capsys, model_dirs, server.url, "python", "--max-prompts", "1",
                              "--no-compare")
    assert code == 0
    assert "Probe: vllm" in out and "| python | 0 | 1 |" in out
    assert "n/a" in out and "reference" not in out


def test_the_comparison_with_our_engine_is_printed_as_sentences_with_both_rates(
        capsys, model_dirs, fake_server):
    """What the markdown report says above its tables, line by line: the header, the command,
    what vLLM cannot give, and what the comparison with our engine found, each a sentence."""
    server = fake_server("serve")  # each completion: one cycle accepting 2 of 4
    code, out, err = probe_vllm(capsys, model_dirs, server.url, "python", "--max-prompts", "2")
    assert code == 0 and err == ""
    said = out.split("\n\n| domain |")[0].splitlines()
    assert said[0].startswith("Probe: vllm, target ") and said[1].startswith("Command: `")
    assert said[2].startswith("Through vLLM: the sum-min α (expected α) and top-1 agreement")
    found = said[3]
    assert found.startswith("Nowhere did vLLM accept far fewer draft tokens than specscope's "
                            "engine with the same pair, prompts and settings (far: under 0.5 "
                            "times its rate, at least 10 points lower, and more than chance "
                            "explains). Draft acceptance rates, vLLM against specscope's "
                            "engine: python at T = 0, 50% against ")
    assert "; python at T = 1, 50% against " in found
    assert found.endswith(". Nothing points at a fault in the deployment.")
    assert all(line.endswith((".", ")", "`")) for line in said)


@pytest.mark.parametrize("mode", ["garbage", "die-after-2"])
def test_a_bad_server_is_one_clear_line(capsys, model_dirs, fake_server, mode):
    server = fake_server(mode)
    code, out, err = probe_vllm(capsys, model_dirs, server.url, "python", "--max-prompts", "2")
    assert code == 2 and err.startswith("specscope probe: error:") and "Traceback" not in err


def test_nothing_listening_is_one_clear_line(capsys, model_dirs):
    code, _, err = probe_vllm(capsys, model_dirs, "http://127.0.0.1:9", "python")
    assert code == 2 and "does not answer /health" in err


# ---- the whole flow: vLLM first, then our engine on the same prompts ------------------------


@pytest.fixture(scope="module")
def tiny_pair(model_dirs):
    from engine.decoder.loading import load_pair

    return load_pair(model_dirs["target"], model_dirs["good"], device="cpu")


def pooled(stop_after: int | None = None):
    """A pool that records which engines it was given, keeping only PromptMeasures (and only
    the first ``stop_after`` of them: a probe stopped early)."""
    calls: list[tuple[str, list[str]]] = []

    def pool(measures, engine, notes, config=None):
        calls.append((engine, list(notes)))
        kept = []
        for m in measures:
            if isinstance(m, PromptMeasure):
                kept.append(m)
                if stop_after is not None and len(kept) == stop_after:
                    break
        config = config or CONFIG
        return summarize_probe(kept, config, engine=engine, target="t", draft="d",
                               runs_planned=len(plan(PROMPTS, config)), notices=notes)

    return pool, calls


PROMPTS = [Prompt("one two three four", "python"), Prompt("five six seven", "python")]
CONFIG = ProbeConfig(k=4, temperatures=[0.0], max_new_tokens=4, bootstrap=20)


def test_vllm_then_our_engine_on_the_same_prompts(fake_server, tiny_pair):
    server = fake_server("serve")  # each completion: one cycle accepting 2 of 4
    pool, calls = pooled()
    found = probe_and_compare(server.client, tiny_pair, PROMPTS, CONFIG, pool,
                              notices=["cut to fit"])
    assert [engine for engine, _ in calls] == ["vllm", "specscope"]
    assert calls[0][1] == ["cut to fit", NOT_AVAILABLE]
    assert calls[1][1] == ["cut to fit"]
    assert found.vllm.engine == "vllm" and found.ours.engine == "specscope"
    assert found.vllm.rows[0].draft_acceptance_rate == 0.5
    assert found.ours.rows[0].prompts == 2
    # Our engine cannot accept more than twice vLLM's 0.5: no warning, and the note says so.
    assert found.vllm.notices[-1].startswith("Nowhere did vLLM accept far fewer draft tokens")


def test_both_engines_probe_at_the_k_the_server_drafts_and_say_so(fake_server, tiny_pair):
    """The fake server counts 4 draft positions: a probe asked for k = 2 probes at 4."""
    pool, calls = pooled()
    found = probe_and_compare(fake_server("serve").client, tiny_pair, PROMPTS,
                              replace(CONFIG, k=2), pool)
    assert found.vllm.k == found.ours.k == 4
    said = [n for n in found.vllm.notices if n.startswith("k = 4: the server drafts 4")]
    assert said and "not the 2 asked for" in said[0] and said[0] in calls[1][1]


def test_without_compare_only_vllm_is_probed(fake_server, tiny_pair):
    pool, calls = pooled()
    found = probe_and_compare(fake_server("serve").client, tiny_pair, PROMPTS, CONFIG, pool,
                              compare=False)
    assert [engine for engine, _ in calls] == ["vllm"]
    assert found.ours is None
    assert not any(n.startswith("Nowhere did vLLM") for n in found.vllm.notices)


def test_a_vllm_probe_stopped_early_is_not_compared(fake_server, tiny_pair):
    pool, calls = pooled(stop_after=1)
    found = probe_and_compare(fake_server("serve").client, tiny_pair, PROMPTS, CONFIG, pool)
    assert not found.vllm.complete
    assert [engine for engine, _ in calls] == ["vllm"] and found.ours is None


def test_steps_passes_our_engines_cycle_events_to_the_pool(fake_server, tiny_pair):
    seen: list[type] = []

    def pool(measures, engine, notes, config=None):
        items = list(measures)
        if engine == "specscope":
            seen.extend(type(m) for m in items)
        kept = [m for m in items if isinstance(m, PromptMeasure)]
        return summarize_probe(kept, CONFIG, engine=engine, target="t", draft="d",
                               runs_planned=len(kept), notices=notes)

    probe_and_compare(fake_server("serve").client, tiny_pair, PROMPTS, CONFIG, pool, steps=True)
    assert PromptMeasure in seen and any(t is not PromptMeasure for t in seen)

