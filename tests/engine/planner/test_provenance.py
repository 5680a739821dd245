"""Where alpha came from, and the warning when it was measured on another pair."""

from __future__ import annotations

from engine.planner import provenance
from engine.planner.provenance import AlphaSource

SHIPPED_PROBE = {"engine": "specscope", "target": "models/target", "draft": "models/draft",
                 "drafter": "model", "rows": []}


def test_a_probe_names_its_pair_domains_temperature_and_drafting():
    source = provenance.from_probe(SHIPPED_PROBE, "probe.json", ["kjv", "code"], 0.0,
                                   "greedy")
    assert source.measured
    assert source.text() == ("alpha measured by a probe (probe.json): pair models/target / "
                             "models/draft (a draft model), domains kjv, code, temperature "
                             "0, greedy drafting")
    unstated = provenance.from_probe({"result": SHIPPED_PROBE}, "p.json", ["kjv"], 1.0, None)
    assert unstated.target == "models/target" and "draft sampling not recorded" in \
        unstated.text()


def test_an_eagle_or_lookup_probe_names_its_drafter():
    eagle = provenance.from_probe(SHIPPED_PROBE | {"drafter": "eagle", "eagle": "models/eagle"},
                                  "p.json", ["kjv"], 0.0, None)
    assert (eagle.draft, eagle.drafter) == ("models/eagle", "eagle")
    lookup = provenance.from_probe(SHIPPED_PROBE | {"drafter": "ngram"}, "p.json", [], 0.0, None)
    assert lookup.draft == "prompt lookup" and "(prompt lookup)" in lookup.text()


def test_the_shipped_pairs_alpha_planning_llama_70b_is_warned_about():
    source = provenance.from_probe(SHIPPED_PROBE, "probe.json", ["kjv"], 0.0, None)
    warning = source.mismatch("meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.2-1B",
                              "draft_model")
    assert warning is not None
    assert warning.startswith("alpha was measured on models/target / models/draft (a draft "
                              "model) and plans meta-llama/Llama-3.1-70B / "
                              "meta-llama/Llama-3.2-1B (a draft model): the target and draft "
                              "differ")
    # the same pair, named by another path, is no mismatch
    assert source.mismatch("./models/target/", "models/draft", "draft_model") is None


def test_the_same_pair_with_another_drafter_is_warned_about():
    source = provenance.from_probe(SHIPPED_PROBE, "probe.json", ["kjv"], 0.0, None)
    warning = source.mismatch("models/target", "models/eagle", "eagle")
    assert warning is not None and "the draft and drafter differ" in warning
    assert "itself" in source.mismatch("models/target", "models/target", "self-spec")


def test_vllms_counters_name_the_target_only():
    source = provenance.from_metrics("before.txt and after.txt",
                                     [{"engine": "0", "model_name": "models/target"}])
    assert (source.target, source.draft) == ("models/target", None)
    assert "target models/target (the draft is not recorded)" in source.text()
    assert "temperature not recorded" in source.text()
    assert source.mismatch("models/target", "anything", "draft_model") is None
    assert "the target differs" in source.mismatch("meta-llama/Llama-3.1-8B", "x", "draft_model")


def test_alpha_given_by_hand_says_so_and_warns_of_nothing():
    source = provenance.by_hand("--alpha")
    assert not source.measured
    assert source.text().startswith("alpha given by hand (--alpha)")
    assert source.mismatch("meta-llama/Llama-3.1-70B", "x", "draft_model") is None
    assert source.json()["origin"] == "hand"


def test_json_carries_every_field_and_the_sentence():
    source = AlphaSource("probe", "p.json", "t", "d", "model", ("kjv",), 0.5, "greedy")
    assert source.json() == {"origin": "probe", "where": "p.json", "target": "t", "draft": "d",
                             "drafter": "model", "domains": ["kjv"], "temperature": 0.5,
                             "draft_sample": "greedy", "text": source.text()}
