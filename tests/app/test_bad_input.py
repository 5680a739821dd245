"""Bad input gets a message that says what is wrong with it: not a range the value is inside,
not a parser's internals, and every bad value of one request named at once."""

from __future__ import annotations

import pytest

JSON = {"content-type": "application/json"}


def message_of(response) -> str:
    assert response.status_code == 422, response.text
    return response.json()["message"]


@pytest.mark.parametrize(("body", "field", "says"), [
    (b'{"prompt": "x", "temperature": NaN}', "temperature", "from 0 to 2 (got NaN)"),
    (b'{"prompt": "x", "top_p": -Infinity}', "top_p", "from 0.01 to 1 (got -Infinity)"),
    (b'{"prompt": "x", "seed": 1e20}', "seed", "a whole number from 0 to 2147483647 "
                                               "(got 1e+20)"),
    (b'{"prompt": "x", "k": 4.5}', "k", "a whole number from 1 to 16 (got 4.5)"),
    (b'{"prompt": "x", "k": "4"}', "k", "a whole number from 1 to 16 (got '4')"),
    (b'{"prompt": "x", "temperature": true}', "temperature", "from 0 to 2 (got True)"),
])
def test_a_body_number_out_of_its_kind_says_what_is_allowed(client, body, field, says):
    message = message_of(client.post("/api/runs", content=body, headers=JSON))
    assert message.startswith(f"{field}: must be ") and message.endswith(says), message


def test_every_bad_body_number_is_named_at_once(client):
    body = b'{"prompt": "x", "temperature": NaN, "k": 99}'
    message = message_of(client.post("/api/runs", content=body, headers=JSON))
    assert "temperature: must be" in message and "k: must be" in message


@pytest.mark.parametrize(("query", "says"), [
    ("usable_fraction=NaN", "usable_fraction must be a number from 0.1 to 1 (got 'NaN')"),
    ("bandwidth_fraction=nan", "bandwidth_fraction must be a number from"),
    ("target_params_b=nan", "target_params_b must be a number from 1e-06 to 100000 "
                            "(got 'nan')"),
])
def test_nan_in_a_query_is_named_as_no_number(client, query, says):
    assert says in message_of(client.get("/api/roofline?" + query))


@pytest.mark.parametrize(("path", "name"), [
    ("/api/theory?k=1_0", "k"), ("/api/theory?alpha=0.0_5", "alpha"),
    ("/api/roofline?context=4_096", "context"), ("/api/roofline?batch=1_6", "batch"),
])
def test_digits_with_underscores_are_no_number(client, path, name):
    message = message_of(client.get(path))
    assert message.startswith(name) and "got '" in message, message


def test_the_page_reads_underscored_digits_as_no_number(client):
    page = client.get("/?k=1_0").text
    assert "k=&#39;1_0&#39; is not a number; using the default 4." in page


def test_the_page_probe_names_every_bad_setting(live_server):
    import httpx

    response = httpx.post(live_server.url + "/probes?k=99&max_new_tokens=9999", timeout=30)
    message = message_of(response)
    assert "k must be 1..16" in message and "max new tokens must be 1..64" in message
    assert [d["loc"] for d in response.json()["detail"]] == [["query", "max_new_tokens"],
                                                             ["query", "k"]]


def test_healthz_refuses_parameters_it_does_not_take(client):
    message = message_of(client.get("/healthz?x=1"))
    assert message == "x: is not a parameter of this operation"
    assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize(("body", "says"), [
    (b"[" * 20_000 + b"]" * 20_000, "body: the JSON nests deeper than"),
    (b'{"prompt": "x", "seed": ' + b"9" * 5000 + b"}", "body: the JSON has a number of more "
                                                       "than 4300 digits"),
    (b'{"prompt": "x",', "body: the JSON is not valid at character 15: Expecting property "
                         "name enclosed in double quotes"),
])
def test_a_body_that_is_no_json_gets_422_with_the_reason(client, body, says):
    response = client.post("/api/runs", content=body, headers=JSON)
    assert says in message_of(response)
    assert response.json()["detail"][0]["loc"][0] == "body"
