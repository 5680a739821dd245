"""The training script itself, run at tiny sizes on a tiny text file, so it cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from engine.training import corpus, train_pair

FIXTURE = Path(__file__).parents[2] / "fixtures" / "tiny_corpus.txt"
TINY = [
    "--corpus-file", str(FIXTURE),
    "--vocab-size", "300",
    "--seq-len", "32",
    "--batch-size", "4",
    "--target-shape", "2", "32", "64", "2",
    "--draft-shape", "1", "16", "32", "1",
    "--target-steps", "6",
    "--draft-steps", "4",
    "--eval-windows", "2",
    "--samples", "8",
    "--measure-steps", "5",
    "--threads", "1",
    "--no-bf16",  # bf16 autocast is slow on CPUs without AVX512-BF16; keep the test fast anywhere
    "--quiet",
]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("pair")
    return out, train_pair.main([*TINY, "--out", str(out)])


def test_help_lists_the_options(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        train_pair.parse_args(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for option in ("--corpus-file", "--target-shape", "--draft-shape", "--kd-weight", "--seed"):
        assert option in text


def test_writes_hugging_face_folders(run) -> None:
    out, _ = run
    for name in ("target", "draft"):
        files = {p.name for p in (out / name).iterdir()}
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= files
        config = json.loads((out / name / "config.json").read_text())
        assert config["architectures"] == ["LlamaForCausalLM"]
    assert (out / "training_summary.json").exists()
    prompts = json.loads((out / "heldout_prompts.json").read_text())
    assert prompts["tiny_corpus"] and all(isinstance(p, str) for p in prompts["tiny_corpus"])


def test_saved_pair_loads_and_generates(run) -> None:
    out, _ = run
    tok = AutoTokenizer.from_pretrained(out / "target")
    assert tok.get_vocab() == AutoTokenizer.from_pretrained(out / "draft").get_vocab()
    text = "And God said, Let there be light: “quoted” {cruft} ✓\n\n2 and"
    assert tok.decode(tok(text).input_ids) == text
    for name in ("target", "draft"):
        model = AutoModelForCausalLM.from_pretrained(out / name, dtype=torch.float32)
        ids = tok("And God", return_tensors="pt").input_ids
        new = model.generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=0)
        assert new.shape[1] > ids.shape[1]


def test_weights_are_saved_in_half_precision(run) -> None:
    out, _ = run
    weights = load_file(out / "target" / "model.safetensors")
    assert {t.dtype for t in weights.values()} == {torch.float16}


def test_summary_reports_losses_alpha_and_c(run) -> None:
    _, summary = run
    assert summary["target"]["params"] > summary["draft"]["params"]
    assert summary["target"]["final_train_loss"] > 0
    assert summary["draft"]["final_train_ce"] > 0
    held = summary["heldout"]["tiny_corpus"]
    assert set(held["expected_alpha"]) == {"T=0.0", "T=0.7", "T=1.0"}
    assert all(0 <= a <= 1 for a in held["expected_alpha"].values())
    assert summary["timing"]["c"] > 0


def heldout_ce(tmp_path: Path, steps: int, *extra: str) -> float:
    args = [*TINY, "--target-steps", str(steps), "--measure-steps", "0", "--samples", "0"]
    summary = train_pair.main([*args, *extra, "--out", str(tmp_path / str(steps))])
    return summary["heldout"]["tiny_corpus"]["ce_target"]


def test_training_reduces_the_loss(tmp_path) -> None:
    """The same start (seed), trained 1 step and 40: the held-out loss falls by a margin
    (about 5.7, log 300, to about 4.7 here)."""
    assert heldout_ce(tmp_path, 40) < heldout_ce(tmp_path, 1) - 0.5


def test_same_seed_same_weights(run, tmp_path) -> None:
    out, _ = run
    train_pair.main([*TINY, "--out", str(tmp_path), "--measure-steps", "0", "--samples", "0"])
    for name in ("target", "draft"):
        a = load_file(out / name / "model.safetensors")
        b = load_file(tmp_path / name / "model.safetensors")
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_missing_package_says_how_to_install(monkeypatch) -> None:
    monkeypatch.setattr(corpus.shutil, "which", lambda _: None)
    with pytest.raises(corpus.CorpusMissing, match="apt-get install -y bible-kjv"):
        corpus.kjv_documents()
    with pytest.raises(corpus.CorpusMissing, match="apt-get install -y jargon-text"):
        corpus.jargon_documents(Path("/nonexistent/jargon.txt.gz"))


def test_file_corpus_holds_out_documents() -> None:
    [c] = corpus.load_file(FIXTURE)
    assert c.heldout and c.train
    assert not set(c.heldout) & set(c.train)


def test_measure_pair_runs_the_engine_on_heldout_prompts(run) -> None:
    out, _ = run
    result = train_pair.measure_pair(
        out, temperatures=(1.0,), ks=range(1, 3), n_prompts=1, max_new_tokens=4
    )
    [r] = result["alpha_k4"].values()
    assert 0 <= r["alpha_counted"] <= 1 and r["c"] > 0 and r["speedup"] > 0
    assert set(result["k_sweep"]["T=1.0"]["runs"]) == {1, 2}
