"""A chat judge's client gives up on an endpoint that cannot answer (issue 53): after
`max_failures_in_a_row` calls in a row without a reply from the model, or at once on a 401, 403
or 404, with the reason in one line; a server asking to wait (429) or a model answering, even
badly, is no sign of a dead endpoint."""

from __future__ import annotations

import socket
import time

import pytest

from tests import fake_openai
from tests.fake_openai import completion, refuse, start_fake_openai
from training.judges.chat import ChatJudgeClient, ChatJudgeSettings

SCHEMA = {"type": "object", "properties": {"verdict": {"type": "string"}}, "required": ["verdict"]}
MESSAGES = [{"role": "user", "content": "Compare."}]


@pytest.fixture
def server(request):
    fake, stop = start_fake_openai()
    fake.default = fake_openai.ok({"verdict": "A"})
    request.addfinalizer(stop)
    return fake


def _client(base_url: str, *, sleep=lambda s: None, **overrides) -> ChatJudgeClient:
    values = {"base_url": base_url, "model": "m", "requests_per_minute": 0, "backoff_s": 0.01, **overrides}
    return ChatJudgeClient(ChatJudgeSettings(**values), schema=SCHEMA, sleep=sleep)


def _items(n: int):
    return ((i, MESSAGES) for i in range(n))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_streak_of_failed_calls_gives_up_on_every_item_with_the_reason(server):
    server.default = refuse(500, "the model crashed")
    delivered = []
    client = _client(server.url, concurrency=2, max_retries=4, max_failures_in_a_row=5)
    summary = client.ask_many(_items(30), on_answer=delivered.append)
    assert summary["stopped"] == "failing" and summary["answered"] == 0
    # The fifth failed call stops it; a call of the other thread may be in flight then.
    assert 5 <= len(server.requests) <= 6, len(server.requests)
    assert len(delivered) <= 4 and all(a.stopped == "failing" or a.error for a in delivered)
    assert client.stop_reason == f"the endpoint {server.url} answered HTTP 500 (the model crashed) on 5 calls in a row"


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_401_403_or_404_gives_up_at_once_and_keeps_the_key_out(server, status):
    key = "sk-live-secret-0123"
    server.default = refuse(status, f"Incorrect API key provided: {key}")
    client = _client(server.url, api_key=key, concurrency=1)
    summary = client.ask_many(_items(10), on_answer=lambda answer: None)
    assert summary["stopped"] == "failing" and len(server.requests) == 1
    assert f"answered HTTP {status}" in client.stop_reason and "asking again cannot go better" in client.stop_reason
    assert key not in client.stop_reason and "[api_key]" in client.stop_reason


def test_waits_asked_for_and_answers_that_are_not_verdicts_are_no_streak(server):
    wait = refuse(429, "slow down", Retry_After="0")
    busy = refuse(503, "loading the model", Retry_After="0")
    junk = {"body": completion("not JSON")}
    failed = refuse(500, "boom")
    # A wait asked for neither counts nor ends a streak (2 + 2 failures); an answer, even junk, ends it.
    server.script = [failed] * 2 + [wait, busy, wait] + [failed] * 2 + [junk] + [failed] * 4
    client = _client(server.url, concurrency=1, max_retries=20, max_failures_in_a_row=5)
    summary = client.ask_many(_items(2), on_answer=lambda answer: None)
    assert summary == {**summary, "answered": 2, "failed": 0, "stopped": None}, summary
    assert client.stop_reason == "" and len(server.requests) == 14
    server.script = [failed, wait, failed, busy, failed, wait, failed, failed]  # five in a row, waits between
    assert client.ask(MESSAGES).stopped == "failing" and "on 5 calls in a row" in client.stop_reason


def test_zero_never_gives_up(server):
    server.script = [refuse(500, "boom")] * 12
    client = _client(server.url, concurrency=1, max_retries=12, max_failures_in_a_row=0)
    got = client.ask(MESSAGES)
    assert got.answer == {"verdict": "A"} and len(got.calls) == 13 and client.stop_reason == ""


def test_a_dead_endpoint_is_given_up_in_seconds_at_the_default_settings():
    """The defaults (one request a second, four retries with backoff, four at once): against a
    port nobody listens on, five refused connections and the client stops, not 5 x every item."""
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    client = ChatJudgeClient(ChatJudgeSettings(base_url=dead, model="m"), schema=SCHEMA)
    started = time.monotonic()
    delivered = []
    summary = client.ask_many(_items(66), on_answer=delivered.append)
    took = time.monotonic() - started
    assert summary["stopped"] == "failing" and took < 15, (summary, took)
    assert client.stop_reason == f"the endpoint {dead} refused the connection on 5 calls in a row"
    assert sum(len(a.calls) for a in delivered) == 5 and len([a for a in delivered if a.calls]) <= 4


def test_a_single_ask_stops_retrying_once_the_client_gave_up(server):
    server.default = refuse(502, "bad gateway")
    client = _client(server.url, max_retries=10, max_failures_in_a_row=3)
    got = client.ask(MESSAGES)
    assert got.answer is None and got.stopped == "failing" and len(got.calls) == 3
    assert "(bad gateway) on 3 calls in a row" in got.error
    again = client.ask(MESSAGES)  # the client stays given up: nothing more is sent
    assert again.stopped == "failing" and again.calls == [] and len(server.requests) == 3
