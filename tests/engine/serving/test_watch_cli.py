"""``specscope watch``: one line per scrape, JSON lines, a stored history, clear errors."""

from __future__ import annotations

import json

from support.watch_pages import Counts, PageServer, page

from engine.cli import main
from engine.serving.watch.store import WatchStore

START = Counts(drafts=100, accepted_per_position=(60, 40, 20, 10), generated=1000, running=1)


def test_it_prints_an_interval_per_scrape_and_stores_them(tmp_path, capsys):
    db = tmp_path / "watch.db"
    with PageServer() as server:
        server.page = page(START)
        assert main(["watch", server.url, "--interval", "0.2", "--count", "1", "--db",
                     str(db), "--name", "prod"]) == 0
        server.page = page(START + [2, 1] * 10)
        assert main(["watch", server.url, "--interval", "0.2", "--count", "1", "--db",
                     str(db), "--name", "prod", "--json"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "| started |" in out[0]
    assert json.loads(out[-1])["state"] == "started"  # a new watch reads its own baseline
    stored = WatchStore(str(db), 10).intervals("prod")
    assert [iv["state"] for iv in stored] == ["started", "started"]


def test_two_scrapes_measure_the_interval(capsys):
    with PageServer() as server:
        server.page = page(START)
        # the page changes under the watch between its scrapes
        import threading

        timer = threading.Timer(0.3, lambda: setattr(server, "page",
                                                     page(START + [2, 1] * 10)))
        timer.start()
        assert main(["watch", server.url, "--interval", "0.6", "--count", "2", "--json"]) == 0
        timer.join()
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert last["state"] == "moving" and abs(last["alpha"] - 30 / 50) < 1e-9


def test_bad_arguments_are_a_message_and_status_2(tmp_path, capsys):
    assert main(["watch", "ftp://x", "--count", "1"]) == 2
    assert "not an http" in capsys.readouterr().err
    (tmp_path / "plan.json").write_text("[]")
    assert main(["watch", "http://127.0.0.1:9", "--plan", str(tmp_path / "plan.json")]) == 2
    assert "holds no range" in capsys.readouterr().err


def test_the_costs_of_specscopes_own_loop_are_refused_with_the_command_for_vllms(tmp_path,
                                                                                  capsys):
    """``specscope costs`` writes "method": "loop": this project's engine's steps, not a vLLM
    server's; the break-even of a vLLM deployment needs vLLM's (sweep --costs-out)."""
    passes = [{"model": "target", "batch": 1, "tokens": 1, "median_ms": 10.0},
              {"model": "draft", "batch": 1, "tokens": 1, "median_ms": 2.0},
              {"model": "target", "batch": 1, "tokens": 3, "median_ms": 11.0}]
    loop = tmp_path / "loop-costs.json"
    loop.write_text(json.dumps({"version": 1, "method": "loop", "passes": passes, "loop": []}))
    assert main(["watch", "http://127.0.0.1:9", "--count", "1", "--costs", str(loop)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specscope watch: error: this costs file times specscope's own loop")
    assert "specscope sweep --engine vllm --policies off,0,2,4 --costs-out FILE" in err
    assert "Traceback" not in err
    vllm = tmp_path / "vllm-costs.json"
    vllm.write_text(json.dumps({"version": 1, "method": "vllm-steps", "passes": passes}))
    with PageServer() as server:
        server.page = page(START)
        assert main(["watch", server.url, "--count", "1", "--costs", str(vllm)]) == 0
    assert "no costs" not in capsys.readouterr().err
