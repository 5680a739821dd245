"""``specscope probe`` and ``specscope calibrate`` from the command line."""

from __future__ import annotations

import json

import pytest

from engine import cli
from engine.measure import probe as probe_module


@pytest.fixture
def prompt_file(tmp_path):
    path = tmp_path / "support.jsonl"
    path.write_text('{"text": "the quick brown fox", "domain": "foxes"}\n'
                    '{"text": "the cat sat on the mat"}\n', encoding="utf-8")
    return str(path)


def probe(capsys, model_dirs, *extra: str):
    argv = ["probe", "--target", model_dirs["target"], "--draft", model_dirs["good"],
            "--device", "cpu", "--max-new-tokens", "6", "--k", "2", "--bootstrap", "50",
            "--quiet", *extra]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_json_holds_rows_chart_data_and_the_command(capsys, model_dirs, prompt_file, tmp_path):
    out_path = tmp_path / "probe.json"
    code, out, _ = probe(capsys, model_dirs, prompt_file, "--temperatures", "0,1", "--json",
                         "--out", str(out_path))
    assert code == 0
    report = json.loads(out)
    assert report == json.loads(out_path.read_text())
    assert [(r["domain"], r["temperature"]) for r in report["rows"]] == [
        ("foxes", 0.0), ("support", 0.0), ("foxes", 1.0), ("support", 1.0)]
    assert report["complete"] and report["runs_measured"] == 4
    assert set(report["charts"]) == {"alpha_by_domain", "alpha_vs_temperature"}
    assert report["command"].startswith("specscope probe --target")


def test_markdown_table_for_a_builtin_set(capsys, model_dirs):
    code, out, _ = probe(capsys, model_dirs, "python", "--max-prompts", "2",
                         "--temperatures", "0.7")
    assert code == 0
    assert "| python | 0.7 | 2 |" in out and "counted α [95% CI]" in out


def test_ctrl_c_prints_what_was_measured_so_far(capsys, model_dirs, prompt_file, monkeypatch):
    real = probe_module.measure_events
    calls = []

    def interrupted_after_three(*args, **kwargs):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(probe_module, "measure_events", interrupted_after_three)
    code, out, err = probe(capsys, model_dirs, prompt_file, "--temperatures", "0,0.7,1")
    assert code == 130
    assert "interrupted; 3 of 6 prompt runs measured" in err
    assert "**Stopped early**: 3 of 6 prompt runs measured" in out
    assert "| foxes | 0.7 |" in out and "| foxes | 1 |" not in out


@pytest.mark.parametrize("extra,message", [
    (["--temperatures", "-1"], "temperature must be a number >= 0"),
    (["--k", "0"], "k (draft tokens per cycle)"),
    (["no_such_file.jsonl"], "no such file, and not a built-in set"),
    (["--pair", "nope"], "--pair 'nope' is not one of"),
])
def test_bad_options_are_one_clear_line(capsys, model_dirs, extra, message):
    code, _, err = probe(capsys, model_dirs, *extra)
    assert code == 2 and message in err and "Traceback" not in err


def test_calibrate_one_snapshot_and_a_window(capsys, tmp_path):
    def metrics(drafts, accepted, per_pos):
        lines = [f'vllm:spec_decode_num_drafts_total{{model_name="m",engine="0"}} {drafts}',
                 f'vllm:spec_decode_num_draft_tokens_total{{model_name="m",engine="0"}} '
                 f"{2 * drafts}",
                 f'vllm:spec_decode_num_accepted_tokens_total{{model_name="m",engine="0"}} '
                 f"{accepted}"]
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name="m",'
                  f'engine="0",position="{i}"}} {n}' for i, n in enumerate(per_pos)]
        return "\n".join(lines) + "\n"

    before, after = tmp_path / "before.txt", tmp_path / "after.txt"
    before.write_text(metrics(10, 12, [7, 5]))
    after.write_text(metrics(20, 20, [12, 8]))
    assert cli.main(["calibrate", str(before)]) == 0
    out = capsys.readouterr().out
    assert "since the server started" in out and "| engine=0, model_name=m | 2 | 10 |" in out
    assert cli.main(["calibrate", str(before), str(after), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["drafts"] == 10 and row["alpha_counted"] == pytest.approx(8 / (8 + 10 - 3))
    assert cli.main(["calibrate", str(after), str(before)]) == 2
    assert "went backwards" in capsys.readouterr().err
