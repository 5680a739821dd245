"""The OpenAPI schema is the truth: schemathesis generates requests from it, ones that fit it
and ones that break it, sends them to the real server (uvicorn, the tiny pair) and checks
every answer against it: no 5xx, only documented status codes and content types, bodies that
match the documented models, requests that break the schema refused and requests that fit
it accepted.

The examples are bounded (and derandomised) so the whole test runs in well under a minute.
"""

from __future__ import annotations

import httpx
import jsonschema_rs
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance
from support import metrics_text

from app.live import parse_run_tree

EXAMPLES = 10  # per operation and mode
# The calibrate body's texts are vLLM /metrics pages: the schema names their format.
schemathesis.openapi.format(metrics_text.FORMAT, metrics_text.snapshot())


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
    ("GET /watch/{name}.json", POSITIVE), ("GET /watch/{name}.csv", POSITIVE),  # any name
    ("GET /metrics", POSITIVE),  # no input to break
    ("GET /api/validation", POSITIVE), ("GET /api/validation", NEGATIVE),
]
# A schema can say a body is text, not that the text is a prompt file (no NUL bytes, at least
# one prompt, JSONL lines that parse): any string fits, and one that is not is refused with
# the documented 422 saying why. Every other check still holds for it.
CONTENT_ONLY_THE_SERVER_CAN_JUDGE = {("POST /api/probes", POSITIVE)}
# Two snapshots must be taken in order, which a schema can only say in words.


def a_tree_the_drafter_draws(body) -> bool:
    """A run's tree must be one (every path's parent and elder siblings in it) of its
    drafter's syntax, which a schema's pattern cannot say."""
    try:
        parse_run_tree(body.get("tree", ""), body.get("drafter", "model"))
    except ValueError:
        return False
    return True


IN_WORDS = {("POST /api/calibrate", POSITIVE): lambda case: metrics_text.in_order(case.body),
            ("POST /api/runs", POSITIVE): lambda case: a_tree_the_drafter_draws(case.body)}


@pytest.mark.parametrize(("label", "mode"), CASES)
def test_every_answer_is_what_the_schema_says(live_server, api_schema, label, mode):
    operation = operations(api_schema)[label]
    excluded = ([positive_data_acceptance] if (label, mode) in CONTENT_ONLY_THE_SERVER_CAN_JUDGE
                else [])

    cases = operation.as_strategy(generation_mode=mode)
    if (label, mode) in IN_WORDS:
        cases = cases.filter(IN_WORDS[label, mode])

    @given(case=cases)
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case) -> None:
        case.call_and_validate(base_url=live_server.url, timeout=60, excluded_checks=excluded)

    check()


def body_schema(api_schema_json: dict, path: str) -> dict:
    content = api_schema_json["paths"][path]["post"]["requestBody"]["content"]
    return content["application/json"]["schema"] | {
        "components": api_schema_json.get("components", {})}


@pytest.mark.parametrize("body", [{"after": None, "before": ""}, {"before": " \n"},
                                  {"before": "x", "after": 1}, {}])
def test_a_calibrate_body_the_server_refuses_is_invalid_under_the_schema(live_server, body):
    published = httpx.get(live_server.url + "/openapi.json").json()
    assert not jsonschema_rs.validator_for(body_schema(published, "/api/calibrate")).is_valid(body)
    assert httpx.post(live_server.url + "/api/calibrate", json=body).status_code == 422


@pytest.mark.parametrize("path", ["/api/runs", "/api/calibrate"])
@pytest.mark.parametrize("body", [b"{not json", b'{"prompt": "caf\xe9"}', b"\xff\xfe{}"])
def test_a_body_that_is_not_json_gets_the_documented_422(live_server, path, body):
    """Not UTF-8, or not JSON: an invalid body, answered as every invalid body is."""
    response = httpx.post(live_server.url + path, content=body,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][0] == "body"
