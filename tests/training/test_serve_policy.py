"""A registered policy served over the OpenAI API (training/policy/serving.py, `manage.py
serve_policy`): the official `openai` client, as an outside program, chats, gets tool calls,
sends the tool result back and streams; bad requests get OpenAI's error shape, never a 500."""

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings

from annotate.models import Policy
from tests.helpers import calculator_policy
from training.envs.arithmetic import ArithmeticEnvironment
from training.envs.base import EpisodeRunner
from training.policy.serving import PolicyServer, default_threads
from training.policy.serving_http import serve

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    return calculator_policy(tmp_path_factory.mktemp("served") / "calculator")


@pytest.fixture(scope="module")
def served(policy_dir):
    httpd = serve(PolicyServer(policy_dir, name="calculator", threads=1), "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def _request(port: int, method: str, path: str, body=None, raw: bytes | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read() or b"{}")
    connection.close()
    return response.status, answer


def _task_request(tmp_path: Path) -> Path:
    env = ArithmeticEnvironment(seed=11, n_tasks=60)
    runner = EpisodeRunner(env)
    task = env.tasks("train")[0]
    spec = {
        "messages": env.opening_messages(task),
        "tools": [t.as_openai() for t in runner.tools.values()],
        "tool_result": "42",
    }
    path = tmp_path / "request.json"
    path.write_text(json.dumps(spec))
    return path


def test_the_openai_client_chats_calls_tools_sends_results_and_streams(served, tmp_path):
    url, _ = served
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests/training/openai_roundtrip.py"),
            url,
            "calculator",
            str(_task_request(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,  # an outside program: not the project's directory
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["models"] == ["calculator"]
    # The cloned policy calls the calculator first, greedy, as in its demonstrations.
    assert seen["first"]["finish_reason"] == "tool_calls" and seen["calls"][0][0] == "calculate", seen
    assert isinstance(seen["calls"][0][1], dict) and seen["usage"] > 0
    assert seen["second"]["finish_reason"] in ("tool_calls", "stop", "length")
    assert seen["stream"] == {"names": ["calculate"], "finish": ["tool_calls"]}
    assert seen["refused"]["status"] == 400 and "temperature" in seen["refused"]["message"]


@pytest.mark.parametrize(
    "body, param",
    [
        ([], None),
        ({"messages": "hi"}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages"),
        ({"messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]}, "messages"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": {"a": 1}}, "tools"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, "tools"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 0}, "n"),
        ({"messages": [{"role": "user", "content": "x"}], "n": True}, "n"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": "5"}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}, "tool_choice"),
        ({"messages": [{"role": "user", "content": "x"}], "logprobs": True}, "logprobs"),
        ({"messages": [{"role": "user", "content": "x"}], "functions": []}, "functions"),
        ({"messages": [{"role": "user", "content": "x"}], "stop": [1]}, "stop"),
        ({"messages": [{"role": "user", "content": "x"}], "top_p": 0}, "top_p"),
        ({"messages": [{"role": "assistant", "tool_calls": [{"function": "calc"}]}]}, "messages"),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "a", "function": {"name": "calculate", "arguments": "{"}}],
                    }
                ]
            },
            "messages",
        ),
    ],
)
def test_bad_requests_get_openais_error_shape_with_the_field(served, body, param):
    _, port = served
    status, answer = _request(port, "POST", "/v1/chat/completions", body)
    assert status == 400, answer
    assert answer["error"]["type"] == "invalid_request_error" and answer["error"]["message"]
    assert answer["error"]["param"] == param


def test_unreadable_bodies_routes_and_methods_are_refused_in_json(served):
    _, port = served
    assert _request(port, "POST", "/v1/chat/completions", raw=b'{"messages": [NaN]}')[0] == 400
    assert _request(port, "POST", "/v1/chat/completions", raw=b"\xff\xfe")[0] == 400
    assert _request(port, "POST", "/v1/completions", {"prompt": "x"})[0] == 404
    assert _request(port, "GET", "/v1/nothing")[0] == 404
    assert _request(port, "DELETE", "/v1/models")[0] == 405
    # Issue 45: the completion route takes POST, so GET is 405, not 404; OPTIONS is JSON, not a 501 page.
    status, answer = _request(port, "GET", "/v1/chat/completions")
    assert status == 405 and answer["error"]["message"].startswith("method not allowed")
    status, answer = _request(port, "OPTIONS", "/v1/chat/completions")
    assert status == 405 and "error" in answer
    status, answer = _request(
        port,
        "POST",
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "n": 2, "seed": 1},
    )
    assert status == 200 and len(answer["choices"]) == 2 and answer["usage"]["completion_tokens"] <= 6
    assert all(c["finish_reason"] in ("stop", "length") for c in answer["choices"])


@pytest.mark.django_db(transaction=True)
def test_serve_policy_serves_a_registered_policy_by_name_and_checks_the_key(policy_dir, reward_model_dir, tmp_path):
    from rewardmodel.models import RewardModel
    from tests.rewardmodel.rm_fixtures import simulated_snapshot

    Policy.objects.create(name="calculator", version="1", model_dir=str(policy_dir))
    ranker = RewardModel.objects.create(
        name="ranker", snapshot=simulated_snapshot(tasks=8, seed=5), backbone="policy-llama", model_dir=reward_model_dir
    )
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "ARBITER_SERVE_API_KEY": "sesame",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
    }
    missing = subprocess.run(
        [sys.executable, "manage.py", "serve_policy", "nobody"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert missing.returncode != 0 and "No policy 'nobody'" in missing.stderr and "calculator" in missing.stderr
    no_ranker = subprocess.run(
        [sys.executable, "manage.py", "serve_policy", "calculator", "--reward-model", "9999"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert no_ranker.returncode != 0 and "--reward-model: no reward model '9999'" in no_ranker.stderr
    assert f"{ranker.pk}: ranker" in no_ranker.stderr
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve_policy", "calculator", "--port", "0"]  # threads: the safe default
        + ["--reward-model", "ranker"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = [proc.stdout.readline() for _ in range(1)]
        while "Serving" not in lines[-1] and lines[-1] and len(lines) < 50:  # after any start-up output
            lines.append(proc.stdout.readline())
        line = lines[-1]
        assert "Serving calculator@1 at http://127.0.0.1:" in line, lines
        threads = default_threads()
        assert f"({threads} torch thread{'s' if threads != 1 else ''}; Ctrl-C stops)" in line, line
        assert any(f"Reranking best_of candidates with {reward_model_dir}" in earlier for earlier in lines)
        port = int(line.split("127.0.0.1:")[1].split("/")[0])
        assert _request(port, "GET", "/health")[0] == 200
        status, answer = _request(port, "GET", "/v1/models")
        assert status == 401 and answer["error"]["type"] == "authentication_error"
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", "/v1/models", headers={"Authorization": "Bearer sesame"})
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["data"][0]["id"] == "calculator"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    deadline = time.monotonic() + 5
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is not None


@pytest.fixture(scope="module")
def reward_model_dir(tmp_path_factory):
    """A tiny reward model: its ranking is arbitrary, which is what the test needs: the served
    choice must be its favourite, whatever it prefers."""
    from tests.rewardmodel.rm_fixtures import tiny_reward_model_dir

    return tiny_reward_model_dir(tmp_path_factory.mktemp("rm"))


def test_best_of_returns_the_reward_models_favourite_of_the_candidates(policy_dir, reward_model_dir):
    """best_of 4 samples the candidates n=4 would (the same seed), scores each conversation as an
    episode, and returns the favourite; without a reward model, or below n, it is refused by name."""
    from rewardmodel.scoring import RewardScorer
    from training.policy.conversations import conversation_steps
    from training.policy.serving_requests import RequestError, parse_request

    env = ArithmeticEnvironment(seed=11, n_tasks=60)
    runner = EpisodeRunner(env)
    body = {
        "messages": env.opening_messages(env.tasks("train")[3]),
        "tools": [t.as_openai() for t in runner.tools.values()],
        "temperature": 1.5,
        "seed": 7,
        "max_tokens": 24,
    }
    server = PolicyServer(policy_dir, name="calculator", threads=1, reward_model=reward_model_dir)
    candidates = server.complete(parse_request({**body, "n": 4}))["choices"]
    best = server.complete(parse_request({**body, "best_of": 4}))["choices"]

    def turn(choice):
        message = choice["message"]
        return message.get("content"), [
            (c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []
        ]

    assert len({str(turn(c)) for c in candidates}) > 1  # the candidates differ, so the choice means something
    request = parse_request(body)
    answers = [k for k, c in enumerate(candidates) if PolicyServer._is_answer(c["message"], request)]
    scores = RewardScorer(reward_model_dir).score_episodes(
        [conversation_steps([*body["messages"], candidates[k]["message"]], request.tools) for k in answers]
    )
    assert len(best) == 1 and best[0]["index"] == 0
    if 0 in answers:  # the first sample answers: the reward model's favourite answer is returned
        assert turn(best[0]) == turn(candidates[answers[max(range(len(answers)), key=lambda i: scores[i])]])
    else:  # it calls a tool: the turn is as sampled (unfinished episodes are not ranked)
        assert turn(best[0]) == turn(candidates[0])

    with pytest.raises(RequestError, match="best_of: this server has no reward model"):
        PolicyServer(policy_dir, name="calculator", threads=1).complete(parse_request({**body, "best_of": 2}))
    with pytest.raises(RequestError, match="best_of: at least n"):
        parse_request({**body, "n": 3, "best_of": 2})
    for bad in (0, 9, "4", 2.5, True):
        with pytest.raises(RequestError, match="best_of"):
            parse_request({**body, "best_of": bad})


def test_a_served_conversation_is_recorded_as_the_runner_records_an_episode():
    from training.envs.base import ANSWER_TOOL, INVALID_TOOL, Tool
    from training.policy.conversations import conversation_steps

    search = Tool("search", "Search.", {"type": "object", "properties": {"query": {"type": "string"}}})
    messages = [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "Where was Kessa born?"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "search", {"query": "Kessa"})]},
        {"role": "tool", "tool_call_id": "c1", "content": "Kessa was born in Orlo."},
        {"role": "assistant", "content": None, "tool_calls": [_call("c3", "search", {"query": "Orlo"})]},
        {"role": "tool", "tool_call_id": "c3", "content": "Error: unknown page"},
        {"role": "assistant", "content": "Orlo, I read.", "tool_calls": [_call("c2", "answer", {"text": "Orlo"})]},
    ]
    question, steps = conversation_steps(messages, [search, ANSWER_TOOL])
    assert question == "Where was Kessa born?"
    assert steps == [
        {"kind": "action", "tool": "search", "arguments": {"query": "Kessa"}},
        {"kind": "observation", "tool": "search", "content": "Kessa was born in Orlo."},
        {"kind": "action", "tool": "search", "arguments": {"query": "Orlo"}},
        {"kind": "observation", "tool": "search", "content": "Error: unknown page", "is_error": True},
        {"kind": "thought", "text": "Orlo, I read."},
        {"kind": "answer", "text": "Orlo"},
    ]
    plain = messages[:2] + [{"role": "assistant", "content": "Orlo"}]
    assert (
        conversation_steps(plain, [])[1]
        == conversation_steps(plain, [search, ANSWER_TOOL])[1]
        == [{"kind": "answer", "text": "Orlo"}]
    )  # plain text is the answer, as the runner reads it where there is an answer tool
    assert conversation_steps(plain, [search])[1] == [
        {"kind": "action", "tool": INVALID_TOOL, "arguments": {"text": "Orlo"}},
        {"kind": "observation", "tool": INVALID_TOOL, "content": "Error: no tool call", "is_error": True},
    ]


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def test_best_of_ranks_answers_when_the_first_sample_answers_and_leaves_a_tool_call_as_sampled():
    from training.envs.base import ANSWER_TOOL, Tool
    from training.policy.serving import PolicyServer
    from training.policy.serving_requests import Request

    class ByAnswer:  # scores an episode by its answer's text: the ranking, not a model, is under test
        def score_episodes(self, items):
            return [{"a": 0.1, "b": 0.9, "c": 0.5}[steps[-1]["text"]] for _, steps in items]

    def answer(text):
        return {"message": {"role": "assistant", "content": None, "tool_calls": [_call("c", "answer", {"text": text})]}}

    search = {"message": {"role": "assistant", "content": None, "tool_calls": [_call("s", "search", {"q": "x"})]}}
    server = PolicyServer.__new__(PolicyServer)
    server.scorer = ByAnswer()
    tools = [Tool("search", "Search.", {"type": "object", "properties": {}}), ANSWER_TOOL]
    request = Request([{"role": "user", "content": "Q?"}], tools, 1.0, 1.0, 16, 1, False, False, None, [], best_of=4)
    assert server._best(request, [answer("a"), search, answer("b"), answer("c")]) == [2, 3, 0, 1]
    assert server._best(request, [search, answer("b"), answer("c"), answer("a")]) == [0, 1, 2, 3]
    plain = {"message": {"role": "assistant", "content": "c"}}  # plain text answers where there is an answer tool
    assert server._best(request, [plain, answer("b")]) == [1, 0]


def test_another_models_name_and_the_responses_api_are_refused_in_openais_shape(served):
    """Issue 45: a request for a model this server does not serve is OpenAI's 404
    `model_not_found`, not this policy's answer under another name; the Responses API (the
    Agents SDK's default) is refused with how to switch to chat completions."""
    _, port = served
    status, answer = _request(
        port, "POST", "/v1/chat/completions", {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert status == 404 and answer["error"]["code"] == "model_not_found" and answer["error"]["param"] == "model"
    assert "'calculator'" in answer["error"]["message"]
    status, answer = _request(port, "POST", "/v1/responses", {"model": "calculator", "input": "hi"})
    assert status == 404 and "set_default_openai_api('chat_completions')" in answer["error"]["message"]
    status, answer = _request(
        port,
        "POST",
        "/v1/chat/completions",
        {"model": "calculator", "messages": [{"role": "user", "content": "hi"}], "parallel_tool_calls": "no"},
    )
    assert status == 400 and answer["error"]["param"] == "parallel_tool_calls"


def test_a_call_of_a_tool_the_request_did_not_declare_is_returned_as_text(served, tmp_path):
    """Issue 45: the calculator policy calls `calculate`; asked with only `lookup` declared, its
    reply cannot be dispatched by the client's framework, so it comes back as text, never as a
    call of an undeclared tool."""
    _, port = served
    spec = json.loads(_task_request(tmp_path).read_text())
    lookup = {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a word up.",
            "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
        },
    }
    body = {"model": "calculator", "messages": spec["messages"], "temperature": 0, "max_tokens": 24}
    status, declared = _request(port, "POST", "/v1/chat/completions", {**body, "tools": spec["tools"]})
    assert status == 200 and declared["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "calculate"
    status, answer = _request(port, "POST", "/v1/chat/completions", {**body, "tools": [lookup]})
    assert status == 200, answer
    choice = answer["choices"][0]
    assert "tool_calls" not in choice["message"] and choice["finish_reason"] in ("stop", "length")
    assert isinstance(choice["message"]["content"], str)


@pytest.mark.parametrize(
    "arguments, parallel, kept",
    [
        ([{"expression": "1 + 1"}, {"expression": "2 + 2"}], True, 2),
        ([{"expression": "1 + 1"}, {"expression": "2 + 2"}], False, 1),  # at most one call, as OpenAI promises
        ([{"expression": 5}], True, 0),  # arguments its schema refuses: text
        ([{"expression": float("inf")}], True, 0),  # not JSON: text, never "Infinity"
    ],
)
def test_a_replys_calls_are_checked_against_the_declared_schemas(arguments, parallel, kept):
    from training.envs.base import Tool
    from training.policy.parsers import ParsedTurn, ToolCall
    from training.policy.serving import PolicyServer
    from training.policy.serving_requests import Request

    class Parser:
        def parse(self, text):
            return ParsedTurn(calls=tuple(ToolCall("calculate", a) for a in arguments))

    tool = Tool(
        "calculate",
        "Work out an expression.",
        {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    )
    fields = {"temperature": 0, "top_p": 1, "max_tokens": 8, "n": 1, "stream": False, "include_usage": False}
    request = Request(messages=[], tools=[tool], seed=None, stop=[], parallel_tool_calls=parallel, **fields)
    choice = PolicyServer._choice(0, "written", True, request, Parser())
    calls = choice["message"].get("tool_calls") or []
    assert len(calls) == kept
    assert choice["finish_reason"] == ("tool_calls" if kept else "stop")
    if not kept:
        assert choice["message"]["content"] == "written"
