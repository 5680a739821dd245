"""The OpenAPI schema is the truth: schemathesis generates requests from it, ones that fit it
and ones that break it, sends them to the real server (uvicorn, the tiny pair) and checks
every answer against it: no 5xx, only documented status codes and content types, bodies that
match the documented models, requests that break the schema refused and requests that fit
it accepted.

The examples are bounded (and derandomised) so the whole test runs in well under a minute.
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

EXAMPLES = 10  # per operation and mode


@pytest.fixture(scope="module")
def api_schema(live_server):
    return schemathesis.openapi.from_dict(httpx.get(live_server.url + "/openapi.json").json())


POSITIVE, NEGATIVE = GenerationMode.POSITIVE, GenerationMode.NEGATIVE


def operations(api_schema) -> dict[str, object]:
    return {op.label: op for op in (r.ok() for r in api_schema.get_all_operations())}


def test_the_schema_lists_every_api_operation(api_schema):
    # A new operation goes into the list below, so that it is fuzzed too.
    listed = {label for label, _ in CASES}
    assert set(operations(api_schema)) == listed


CASES = [
    ("GET /api/theory", POSITIVE), ("GET /api/theory", NEGATIVE), ("POST /api/runs", POSITIVE),
    ("POST /api/runs", NEGATIVE), ("GET /api/runs/status", POSITIVE),  # no input to break
    ("GET /api/runs/{run_id}", POSITIVE),  # any string is an id the schema allows
    ("GET /api/probes/{probe_id}", POSITIVE),  # the same
    ("GET /api/roofline", POSITIVE), ("GET /api/roofline", NEGATIVE),
    ("GET /api/plan", POSITIVE), ("GET /api/plan", NEGATIVE),
    ("POST /api/probes", POSITIVE), ("POST /api/probes", NEGATIVE),
    ("POST /api/calibrate", POSITIVE), ("POST /api/calibrate", NEGATIVE),
    ("GET /healthz", POSITIVE),  # no input to break
]
# A schema can say a body is text, not that the text is a prompt file (no NUL bytes, at least
# one prompt, JSONL lines that parse) or a vLLM server's /metrics page (with speculative-
# decoding counters): any string fits, and one that is neither is refused with the documented
# 422 saying why. Every other check still holds for these two.
CONTENT_ONLY_THE_SERVER_CAN_JUDGE = {("POST /api/probes", POSITIVE),
                                     ("POST /api/calibrate", POSITIVE)}


@pytest.mark.parametrize(("label", "mode"), CASES)
def test_every_answer_is_what_the_schema_says(live_server, api_schema, label, mode):
    operation = operations(api_schema)[label]
    excluded = ([positive_data_acceptance] if (label, mode) in CONTENT_ONLY_THE_SERVER_CAN_JUDGE
                else [])

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case) -> None:
        case.call_and_validate(base_url=live_server.url, timeout=60, excluded_checks=excluded)

    check()
