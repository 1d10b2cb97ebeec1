"""The judges' chat client (training/judges/chat.py) against a real OpenAI-compatible server
with a real model: a tiny cloned policy served by training/policy/serving.py, the server
`manage.py serve_policy` runs (started here in-process, as tests/training/test_serve_policy.py
does, with a key). That server honours `response_format` (issue 53: it refused it with a 400
and the client fell back to prompt mode), so the client stays in json_schema mode; the tiny
model's reply is JSON as far as it goes but never closes its object, so each attempt is
recorded as cut at max_tokens and the item fails, after a bounded number of retries."""

import json

import pytest

from tests.helpers import answer, calculator_policy, call, seen, served_policy
from training.judges.chat import ChatJudgeClient, ChatJudgeSettings
from training.judges.prompt import judge_messages, verdict_schema
from training.policy.json_constraint import JsonPrefix

KEY = "sesame-judge"
DIMENSIONS = [{"name": "correctness", "scale": 5, "description": "Is the final answer right?", "required": True}]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    policy_dir = calculator_policy(tmp_path_factory.mktemp("judged") / "calculator")
    with served_policy(policy_dir, "calculator", api_key=KEY) as url:
        yield url + "/v1"


def _messages(schema: dict) -> list[dict]:
    return judge_messages(
        guidelines="Prefer the correct answer.",
        dimensions=DIMENSIONS,
        task_prompt="What is 6 * 7?",
        first=([call("calculate", expression="6*7"), seen("calculate", "42"), answer("42")], "42"),
        second=([answer("41")], "41"),
        schema=schema,
    )


def _settings(url: str, **overrides) -> ChatJudgeSettings:
    values = {
        "base_url": url,
        "model": "calculator",
        "api_key": KEY,
        "max_retries": 1,
        "backoff_s": 0.01,
        "max_tokens": 24,
        "requests_per_minute": 0,
    }
    return ChatJudgeSettings(**{**values, **overrides})


def test_a_server_with_structured_output_keeps_json_schema_and_a_model_that_never_closes_fails_clearly(served):
    schema = verdict_schema(DIMENSIONS)
    messages = _messages(schema)
    sleeps = []
    client = ChatJudgeClient(_settings(served), schema=schema, sleep=sleeps.append)
    got = client.ask(messages, key="comparison-1")

    assert got.key == "comparison-1" and got.answer is None
    assert got.error.startswith("no answer after 2 attempts; the last: "), got.error
    assert got.error.endswith("(the reply was cut at max_tokens)"), got.error
    assert [c.structured_output for c in got.calls] == ["json_schema", "json_schema"] and client.mode == "json_schema"
    assert [c.status for c in got.calls] == ["invalid", "invalid"], [c.error for c in got.calls]
    assert [c.attempt for c in got.calls] == [1, 2] and len(sleeps) == 1
    for attempt in got.calls:
        assert attempt.http_status == 200 and attempt.request["response_format"]["json_schema"]["schema"] == schema
        reply = json.loads(attempt.response_text)
        assert reply["model"] == "calculator" and reply["choices"][0]["finish_reason"] == "length"
        content = reply["choices"][0]["message"]["content"]
        assert content.lstrip().startswith("{") and JsonPrefix().feed(content) is not None, content
        assert attempt.prompt_tokens == reply["usage"]["prompt_tokens"] > 0 and attempt.latency_s > 0
    assert KEY not in json.dumps([c.request for c in got.calls]) + got.error


def test_a_wrong_key_is_refused_once_and_not_recorded(served):
    schema = verdict_schema(DIMENSIONS)
    client = ChatJudgeClient(_settings(served, api_key="not-the-key"), schema=schema, sleep=lambda s: None)
    got = client.ask(_messages(schema))
    assert got.answer is None and len(got.calls) == 1 and got.calls[0].http_status == 401
    assert got.error.startswith("HTTP 401: ") and got.error.endswith("(not retried)")
    assert "not-the-key" not in got.error + got.calls[0].response_text + json.dumps(got.calls[0].request)
