"""GET /api/theory: the same figures as engine.analytic.theory, strict about its input."""

from __future__ import annotations

import pytest

from engine.analytic import theory

KEYS = {"expected_accepted", "expected_tokens", "cycle_cost", "speedup", "baseline_tok_s",
        "spec_tok_s", "baseline_s", "spec_s", "best_k", "best_speedup", "curve", "pi"}


def test_reference_case(client):
    body = client.get("/api/theory?alpha=0.7&k=4&c=0.18&v=1&step_ms=22&tokens=500").json()
    assert set(body) == KEYS
    assert body["pi"] is None  # a draft model: every cycle proposes
    assert round(body["speedup"], 3) == 1.612
    assert body["best_k"] == 3 and round(body["best_speedup"], 2) == 1.64
    assert round(body["spec_s"] * 1000) == 6823


def test_curve_covers_k_1_to_16_and_matches_theory(client):
    body = client.get("/api/theory?alpha=0.83&c=0.07&v=1.3").json()
    assert [p["k"] for p in body["curve"]] == list(range(1, 17))
    for p in body["curve"]:
        assert p["speedup"] == pytest.approx(theory.speedup(0.83, p["k"], 0.07, 1.3))
        assert set(p) == {"k", "expected_tokens", "cycle_cost", "speedup"}


def test_defaults_are_the_reference_case(client):
    assert client.get("/api/theory").json()["best_k"] == 3


def test_prompt_lookup_prices_a_share_pi_of_cycles_with_a_proposal(client):
    from engine.analytic import lookup

    body = client.get("/api/theory?drafter=ngram&pi=0.4&alpha=0.8&k=3&c=0.01&v=1.5").json()
    assert body["pi"] == 0.4
    assert body["speedup"] == pytest.approx(lookup.speedup(0.8, 3, 0.4, 0.01, 1.5))
    for p in body["curve"]:
        assert p["speedup"] == pytest.approx(lookup.speedup(0.8, p["k"], 0.4, 0.01, 1.5))
    # pi does nothing to the draft model
    assert client.get("/api/theory?pi=0.1").json() == client.get("/api/theory").json()


def test_an_unknown_drafter_is_a_422_naming_the_choices(client):
    response = client.get("/api/theory?drafter=eagle")
    assert response.status_code == 422
    message = response.json()["message"]
    assert message.startswith("drafter") and "ngram" in message


@pytest.mark.parametrize(
    "query,name,allowed",
    [
        ("alpha=1.7", "alpha", "from 0 to 1"),
        ("k=0", "k", "from 1 to 16"),
        ("k=abc", "k", "whole number from 1 to 16"),
        ("c=-1", "c", "from 0 to 1"),
        ("v=9", "v", "from 0.5 to 3"),
        ("step_ms=0", "step_ms", "from 0.001 to 1000000"),
        ("tokens=x", "tokens", "from 1 to 100000"),
        ("drafter=ngram&pi=1.5", "pi", "from 0 to 1"),
    ],
)
def test_bad_parameters_get_422_naming_the_parameter_and_range(client, query, name, allowed):
    response = client.get("/api/theory?" + query)
    assert response.status_code == 422
    message = response.json()["message"]
    assert message.startswith(name) and allowed in message


def test_api_is_in_the_openapi_schema(client):
    schema = client.get("/openapi.json").json()
    params = {p["name"] for p in schema["paths"]["/api/theory"]["get"]["parameters"]}
    assert params == {"alpha", "k", "c", "v", "step_ms", "tokens", "drafter", "pi"}


def test_docs_page_uses_vendored_swagger(client):
    html = client.get("/docs").text
    assert "/static/vendor/swagger-ui-bundle-" in html and "cdn" not in html


@pytest.mark.parametrize("path", ["/api/theory?alhpa=0.9", "/api/roofline?gpu=8",
                                  "/api/plan?kmax=4"])
def test_a_parameter_the_operation_does_not_take_is_refused_by_name(client, path):
    response = client.get(path)
    assert response.status_code == 422
    name = path.split("?")[1].split("=")[0]
    assert response.json()["detail"][0]["loc"] == ["query", name]
    assert f"{name}: is not a parameter of this operation" in response.json()["message"]


def test_pages_still_read_a_link_with_parameters_they_do_not_know(client):
    assert client.get("/?alpha=0.8&utm_source=review").status_code == 200
