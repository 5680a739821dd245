"""Settings come from SPECSCOPE_ environment variables and are checked when read."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engine.settings import SHIPPED_MODELS, Settings


def test_defaults_serve_the_shipped_pair_on_localhost(monkeypatch):
    for name in ("SPECSCOPE_HOST", "SPECSCOPE_PORT", "SPECSCOPE_PAIRS", "SPECSCOPE_DEFAULT_PAIR"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)
    assert settings.target == str(SHIPPED_MODELS / "target")
    assert settings.draft == str(SHIPPED_MODELS / "draft")


def test_environment_overrides(monkeypatch):
    monkeypatch.setenv("SPECSCOPE_PORT", "9001")
    monkeypatch.setenv("SPECSCOPE_PAIRS", '{"qwen": {"target": "Qwen/Qwen2.5-7B", '
                                          '"draft": "Qwen/Qwen2.5-0.5B", "label": "Qwen 7B"}}')
    monkeypatch.setenv("SPECSCOPE_DEFAULT_PAIR", "qwen")
    monkeypatch.setenv("SPECSCOPE_MAX_NEW_TOKENS_LIMIT", "128")
    settings = Settings()
    assert settings.port == 9001 and settings.max_new_tokens_limit == 128
    assert settings.target == "Qwen/Qwen2.5-7B" and settings.pairs["qwen"].label == "Qwen 7B"


def test_a_pair_may_name_a_target_alone_for_prompt_lookup(monkeypatch):
    monkeypatch.setenv("SPECSCOPE_PAIRS", '{"lookup": {"target": "models/target"}}')
    monkeypatch.setenv("SPECSCOPE_DEFAULT_PAIR", "lookup")
    settings = Settings()
    assert settings.target == "models/target" and settings.draft is None


def test_default_pair_must_be_offered(monkeypatch):
    monkeypatch.setenv("SPECSCOPE_DEFAULT_PAIR", "missing")
    with pytest.raises(ValidationError, match="not one of the pairs"):
        Settings()


@pytest.mark.parametrize("name,value", [("SPECSCOPE_PORT", "http"),
                                        ("SPECSCOPE_MAX_NEW_TOKENS_LIMIT", "0"),
                                        ("SPECSCOPE_QUEUE_SIZE", "-1")])
def test_bad_values_are_refused(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


def test_the_watched_deployments_are_named_http_addresses():
    from engine.settings import Settings

    s = Settings(watch_urls="prod=http://10.0.0.5:8000/, http://10.0.0.6:8000")
    assert s.watch_deployments == {"prod": "http://10.0.0.5:8000",
                                   "10.0.0.6:8000": "http://10.0.0.6:8000"}
    assert Settings().watch_deployments == {} and Settings().watch_interval == 10.0
    for bad in ("file:///etc/passwd", "http://h:1/metrics", "a b=http://h:1",
                "x=http://h:1,x=http://g:1"):
        with pytest.raises(ValueError):
            Settings(watch_urls=bad)
