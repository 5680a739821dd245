"""``--drafter eagle``: the shipped target drafts with the EAGLE head in models/eagle, in
``generate``, ``bench`` and ``probe`` (beside the other drafters), loading no draft model."""

from __future__ import annotations

import json
from pathlib import Path

from engine import cli

MODELS = Path(__file__).parents[2] / "models"
SHIPPED = ["--target", str(MODELS / "target"), "--draft", "/nowhere", "--device", "cpu"]


def test_generate_drafts_with_the_head_and_names_it(capsys):
    argv = ["generate", "And God said", *SHIPPED, "--drafter", "eagle", "--temperature", "0",
            "--max-new-tokens", "16", "--json"]
    assert cli.main(argv) == 0  # the draft's path is never read
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {e["drafter"] for e in events if e["event"] == "cycle"} == {"eagle"}
    summary = next(e for e in events if e["event"] == "summary")
    assert summary["drafter"] == "eagle" and summary["speedup_predicted"] > 0
    assert cli.main([*argv[:-1], "--color", "never"]) == 0
    assert "summary (k = 4, EAGLE head)" in capsys.readouterr().out


def test_a_missing_head_is_a_clear_error(capsys, tmp_path):
    argv = ["generate", "And God said", *SHIPPED, "--drafter", "eagle", "--eagle",
            str(tmp_path), "--max-new-tokens", "4"]
    assert cli.main(argv) == 2
    assert "no EAGLE head there" in capsys.readouterr().err


def test_bench_runs_the_head_on_our_engine_only(capsys, tmp_path):
    argv = ["bench", *SHIPPED, "--drafter", "eagle", "--ks", "2", "--max-prompts", "1",
            "--repeats", "1", "--max-new-tokens", "8", "--temperatures", "0", "--quiet"]
    assert cli.main(argv) == 2
    assert "--ours-only" in capsys.readouterr().err
    out = tmp_path / "bench.json"
    assert cli.main([*argv, "--ours-only", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["setting"]["drafter"] == "eagle"
    assert result["results"]["greedy_check"]["match"]


def test_probe_sets_the_head_beside_the_draft_model_and_prompt_lookup(capsys, tmp_path):
    held_out = json.loads((MODELS / "heldout_prompts.json").read_text())
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"text": texts[0], "domain": domain}) + "\n"
                               for domain, texts in held_out.items()))
    argv = ["probe", str(prompts), "--target", str(MODELS / "target"), "--draft",
            str(MODELS / "draft"), "--device", "cpu", "--k", "3", "--temperatures", "0,1",
            "--max-new-tokens", "16", "--bootstrap", "50", "--drafter", "model,ngram,eagle",
            "--quiet"]
    assert cli.main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["drafters"]) == ["model", "ngram", "eagle"]
    assert out["drafters"]["eagle"]["eagle"] == "models/eagle"
    rows = out["comparison"]
    assert len(rows) == 4 and all({"model", "ngram", "eagle"} <= set(r) for r in rows)
    assert all(r["winner"] in (None, "model", "ngram", "eagle") for r in rows)
    eagle = [r["eagle"] for r in rows]
    assert all(e["alpha_counted"] > 0.3 and e["c"] > 0 for e in eagle)
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "EAGLE head `models/eagle`" in text and "| EAGLE head |" in text


def test_the_sweep_drafts_with_the_head_and_names_it(capsys, tmp_path):
    out = tmp_path / "eagle.json"
    argv = ["sweep", "--engine", "specscope", *SHIPPED, "--drafter", "eagle", "--batch", "1,3",
            "--policies", "off,3", "--new-tokens", "6", "--repeats", "1", "--temperature", "0",
            "--out", str(out)]
    assert cli.main(argv) == 0
    assert "| B | off | k = 3 | best |" in capsys.readouterr().out
    data = json.loads((tmp_path / "eagle-k3.json").read_text())
    assert data["drafter"] == "eagle" and data["draft"] == "EAGLE head models/eagle"
    assert "EAGLE head, k = 3" in data["label"] and data["alpha"] > 0.3


def test_costs_time_the_loop_with_the_head(capsys, tmp_path):
    out = tmp_path / "costs.json"
    argv = ["costs", *SHIPPED, "--drafter", "eagle", "--batch", "1,2", "--k-max", "2",
            "--new-tokens", "8", "--repeats", "1", "--out", str(out)]
    assert cli.main(argv) == 0
    capsys.readouterr()
    data = json.loads(out.read_text())
    assert data["drafter"] == "eagle" and "EAGLE head" in data["label"]
    assert {(s["batch"], s["k"]) for s in data["steps"]} == {(b, k) for b in (1, 2)
                                                             for k in (0, 1, 2)}
