"""The policy server batches, streams and waits on nobody (issue 46): requests that arrive
together are rows of one batch (and `n` is rows of it), a row's reply does not depend on its
batch, content is streamed as it is generated, and the HTTP side refuses in OpenAI's shape
before reading what it need not read (training/policy/serving.py, serving_http.py)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from tests.helpers import calculator_policy
from training.envs.arithmetic import ArithmeticEnvironment
from training.envs.base import EpisodeRunner
from training.policy import serving_http
from training.policy.serving import PolicyServer
from training.policy.serving_http import PolicyApp, PolicyHTTPServer
from training.policy.serving_requests import parse_request

KEY = "sk-test-batches"
HI = {"messages": [{"role": "user", "content": "What is 12 * 7?"}], "temperature": 0, "max_tokens": 12}


@pytest.fixture(scope="module")
def policy_server(tmp_path_factory):
    server = PolicyServer(calculator_policy(tmp_path_factory.mktemp("batches") / "calculator"), name="calc", threads=1)
    yield server
    server.close()


SERVERS: dict[int, PolicyHTTPServer] = {}


def _uvicorn_of(port: int):
    return SERVERS[port].uvicorn


@pytest.fixture(scope="module")
def served(policy_server):
    httpd = PolicyHTTPServer(PolicyApp(policy_server, KEY, body_seconds=1.0), "127.0.0.1", 0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    SERVERS[httpd.server_address[1]] = httpd
    yield httpd.server_address[1]
    httpd.shutdown()


def _post(port: int, body, *, key: str = KEY, method: str = "POST", path: str = "/v1/chat/completions"):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = json.dumps(body).encode() if body is not None else None
    connection.request(method, path, body=data, headers={"Authorization": f"Bearer {key}"})
    response = connection.getresponse()
    raw = response.read()
    connection.close()
    return response.status, raw


def _raw_answer(request: bytes, port: int) -> str:
    """Send raw bytes; the whole response (headers and the body its Content-Length gives)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < _length(answer):
            part = raw.recv(65536)
            if not part:
                break
            answer += part
    return answer.decode()


def _length(answer: bytes) -> int:
    for line in answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def _reply(raw: bytes):
    message = json.loads(raw)["choices"][0]["message"]
    return message.get("content"), [c["function"] for c in message.get("tool_calls") or []]


def test_requests_that_arrive_together_are_one_batch_and_get_their_own_replies(served, policy_server):
    prompts = [f"What is {a} * {b}?" for a, b in ((12, 7), (3, 4), (25, 25), (9, 11))]
    bodies = [{**HI, "messages": [{"role": "user", "content": p}]} for p in prompts]
    alone = [_reply(_post(served, body)[1]) for body in bodies]
    before = len(policy_server.batcher.sizes)
    start, replies = threading.Barrier(len(bodies)), [None] * len(bodies)

    def send(i):
        start.wait()
        replies[i] = _reply(_post(served, bodies[i])[1])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert replies == alone  # greedy: the same reply batched as alone
    sizes = policy_server.batcher.sizes[before:]
    assert sum(rows for _, rows in sizes) == len(bodies) and max(requests for requests, _ in sizes) > 1, sizes


def test_n_choices_are_rows_of_one_batch_and_a_seeded_reply_does_not_depend_on_its_batch(served, policy_server):
    body = {**HI, "temperature": 1.0, "n": 3, "seed": 5, "max_tokens": 8}
    before = len(policy_server.batcher.sizes)
    status, raw = _post(served, body)
    assert status == 200 and len(json.loads(raw)["choices"]) == 3
    assert policy_server.batcher.sizes[before] == (1, 3)
    first = [c["message"] for c in json.loads(raw)["choices"]]
    # The same seeded request again, now beside another request in the same batch.
    other = threading.Thread(target=_post, args=(served, {**HI, "max_tokens": 8}))
    other.start()
    again = [c["message"] for c in json.loads(_post(served, body)[1])["choices"]]
    other.join(60)
    for a, b in zip(first, again):
        assert (a.get("content"), a.get("tool_calls") and [c["function"] for c in a["tool_calls"]]) == (
            b.get("content"),
            b.get("tool_calls") and [c["function"] for c in b["tool_calls"]],
        )


def test_content_is_streamed_as_it_is_generated(served):
    status, raw = _post(served, HI)
    assert status == 200
    whole = json.loads(raw)["choices"][0]["message"]["content"]  # no tools: the text itself
    connection = http.client.HTTPConnection("127.0.0.1", served, timeout=60)
    connection.request(
        "POST", "/v1/chat/completions", json.dumps({**HI, "stream": True}), {"Authorization": f"Bearer {KEY}"}
    )
    response = connection.getresponse()
    events = [line[6:] for line in response.read().decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    deltas = [json.loads(e)["choices"][0]["delta"] for e in events[:-1] if json.loads(e)["choices"]]
    pieces = [d["content"] for d in deltas if d.get("content")]
    assert "".join(pieces) == whole
    assert len(pieces) > 1  # token by token, not the finished reply in one piece


def test_the_key_is_checked_before_the_body_is_read_and_a_large_body_by_its_length(served):
    answer = _raw_answer(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 8000000\r\n\r\n", served)
    assert answer.startswith("HTTP/1.1 401") and '"authentication_error"' in answer
    answer = _raw_answer(
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
        "Content-Length: 900000000\r\n\r\n".encode(),
        served,
    )
    assert answer.startswith("HTTP/1.1 413") and '"invalid_request_error"' in answer


def test_a_body_that_never_arrives_and_a_silent_connection_are_let_go(served, monkeypatch):
    answer = _raw_answer(  # body_seconds is 1 here
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
        "Content-Length: 100\r\n\r\n{".encode(),
        served,
    )
    assert answer.startswith("HTTP/1.1 408") and "did not arrive" in answer
    monkeypatch.setattr(serving_http, "HEADER_SECONDS", 0.5)
    with socket.create_connection(("127.0.0.1", served), timeout=10) as raw:
        started = time.monotonic()
        assert raw.recv(1024) == b""  # closed by the server, with nothing sent
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("method", ["OPTIONS", "PUT", "DELETE", "PATCH"])
def test_every_method_a_route_does_not_take_is_refused_in_openais_shape(served, method):
    status, raw = _post(served, None, method=method)
    assert status == 405 and json.loads(raw)["error"]["type"] == "invalid_request_error"


def test_head_answers_as_get_without_a_body(served):
    assert _post(served, None, method="HEAD", path="/v1/models") == (200, b"")
    assert _post(served, None, method="HEAD", path="/v1/nothing") == (404, b"")
    assert _post(served, None, method="HEAD", path="/health", key="wrong") == (200, b"")


def test_a_failed_batch_answers_each_of_its_requests_with_a_server_error(policy_server, monkeypatch):
    def broken(rows):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(policy_server.batcher, "generate", broken)
    with pytest.raises(RuntimeError, match="out of memory"):
        policy_server.complete(parse_request(HI))


def test_the_servers_connections_send_without_waiting_for_acks(served):
    """Headers and body are two writes: with Nagle's algorithm the body waited 40 ms for the
    client's delayed ACK on every request (benchmarks/serve_concurrent.py found it)."""
    connection = http.client.HTTPConnection("127.0.0.1", served, timeout=10)
    connection.request("GET", "/health")
    connection.getresponse().read()
    server = _uvicorn_of(served)
    sockets = [c.transport.get_extra_info("socket") for c in server.server_state.connections]
    assert sockets and all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in sockets)
    connection.close()


def test_clients_answered_together_are_waited_for_and_batched_together_again():
    """A batch waits (up to fill_seconds) for the clients the last batch answered: three clients
    answered together, coming back 5 ms apart, are one batch again, not three."""
    from concurrent.futures import wait

    from training.policy.serving import Batcher

    seen, gate = [], threading.Event()

    def generate(rows):
        gate.wait(10)  # the first batch holds the thread while three requests queue up
        seen.append(len(rows))

    batcher = Batcher(generate, gather_seconds=0.001, fill_seconds=2.0)
    try:
        blocker = batcher.submit(["x"])
        time.sleep(0.05)
        queued = [batcher.submit([i]) for i in range(3)]
        gate.set()
        wait([blocker, *queued])
        assert seen == [1, 3]
        again = []
        for i in range(3):  # answered together, they come back one by one
            again.append(batcher.submit([i]))
            time.sleep(0.005)
        wait(again)
        assert seen == [1, 3, 3]
        alone = batcher.submit([0])  # one comes back alone: after fill_seconds it goes alone
        wait([alone])
        assert seen[-1] == 1
    finally:
        batcher.close()


@pytest.mark.parametrize("one_pass_padding", [256, 0], ids=["one-pass", "prefilled-apart"])
def test_rows_that_join_a_running_batch_get_the_tokens_they_get_alone(policy_server, monkeypatch, one_pass_padding):
    """Continuous batching: rows admitted between two tokens (their prompts fed in the running
    rows' pass, or prefilled apart and merged into the running cache, padded on the left) and a
    cache trimmed as rows leave change no row's tokens; a row that ends leaves (`left`) while the
    others go on."""
    from training.policy import batch_generation
    from training.policy.batch_generation import Row, generate_rows

    monkeypatch.setattr(batch_generation, "ONE_PASS_PADDING", one_pass_padding)
    merged = []
    monkeypatch.setattr(batch_generation, "merge", lambda *a, merge=batch_generation.merge: merged.append(merge(*a)))

    def prompt(words: int) -> list[int]:
        body = {"messages": [{"role": "user", "content": "What is 12 * 7? " + "and then " * words}]}
        return policy_server.prepare(parse_request(body)).prompt

    # The first row's long prompt makes the later rows padded, then trimmed away when it leaves.
    specs = [(prompt(30), 6), (prompt(0), 40), (prompt(12), 9)]
    pad, model = policy_server.chat.stop_ids[0], policy_server.model

    def alone(spec) -> list[int]:
        row = Row(prompt=spec[0], limit=spec[1])
        generate_rows(model, [row], stop_ids=[], pad_id=pad)  # no end-of-turn: each row runs to its limit
        return row.tokens

    rows = [Row(prompt=p, limit=limit) for p, limit in specs]
    arrivals = {2: [rows[1]], 4: [rows[2]]}  # admitted before the 3rd and the 5th token
    steps, order = iter(range(1, 100)), []
    generate_rows(
        model, rows[:1], stop_ids=[], pad_id=pad, admit=lambda: arrivals.get(next(steps), []), left=order.append
    )
    assert [rows.index(row) for row in order] == [0, 2, 1]
    assert len(merged) == (2 if one_pass_padding == 0 else 0)  # the path this case is about was taken
    assert [row.tokens for row in rows] == [alone(spec) for spec in specs]


def test_a_request_that_arrives_mid_generation_joins_the_running_batch(served, policy_server):
    """A short request sent while a long reply is being generated is admitted into the running
    batch and answered at once, not after the long reply (it used to wait for the next batch)."""
    long_body = {  # this tiny model never closes a JSON object: it writes to max_tokens
        "messages": [{"role": "user", "content": "What is 6 * 7? Answer in JSON."}],
        "response_format": {"type": "json_object"},
        "temperature": 0,
        "max_tokens": 1000,
    }
    joined, answers = policy_server.batcher.joined, {}
    long = threading.Thread(target=lambda: answers.setdefault("long", _post(served, long_body)))
    long.start()
    deadline = time.monotonic() + 30
    while policy_server.batcher.live == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    status, raw = _post(served, HI)
    long_running, joined = long.is_alive(), policy_server.batcher.joined - joined
    long.join(120)
    assert status == 200 and _reply(raw) == _reply(_post(served, HI)[1])
    assert long_running, "the short request was answered only after the long one"
    assert joined == 1
    status, raw = answers["long"]
    assert status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 1000


def _stream_events(port: int, body: dict) -> list[dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {KEY}"}
    connection.request("POST", "/v1/chat/completions", json.dumps({**body, "stream": True}), headers)
    lines = connection.getresponse().read().decode().splitlines()
    events = [line[6:] for line in lines if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_a_tool_calls_name_is_streamed_once_written_then_its_arguments_in_parts(served, policy_server):
    """OpenAI's streamed call: `tool_calls[0]` with its index, id, type and name first, then the
    arguments in fragments; what a client accumulates is the reply not streamed."""
    env = ArithmeticEnvironment(seed=11, n_tasks=60)
    tools = [t.as_openai() for t in EpisodeRunner(env).tools.values()]
    body = {"messages": env.opening_messages(env.tasks("train")[0]), "tools": tools, "temperature": 0}
    whole = json.loads(_post(served, {**body, "max_tokens": 40})[1])["choices"][0]
    assert whole["finish_reason"] == "tool_calls", whole  # the policy calls a tool here
    events = _stream_events(served, {**body, "max_tokens": 40})
    deltas = [event["choices"][0]["delta"] for event in events]
    parts = [(i, call) for i, delta in enumerate(deltas) for call in delta.get("tool_calls") or []]
    (named, first), *rest = parts
    assert first["function"]["name"] and first["id"] and first["type"] == "function" and first["index"] == 0
    fragments = [call["function"]["arguments"] for _, call in rest]
    assert len(fragments) >= 2 and named < rest[0][0], parts  # the name before the arguments, which come in parts
    streamed = {"name": first["function"]["name"], "arguments": "".join(fragments)}
    assert streamed == whole["message"]["tool_calls"][0]["function"]
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert not any(delta.get("content") for delta in deltas) and whole["message"]["content"] is None
    # As it is generated: the name goes out while the reply's later tokens are still to come.
    seen = []
    prepared = policy_server.prepare(parse_request({**body, "max_tokens": 40, "stream": True}))
    texts, rows, done = policy_server.start(prepared, lambda _, delta: seen.append((delta, len(texts[0].ids))))
    done.result()
    named_at = next(tokens for delta, tokens in seen if delta.get("tool_calls"))
    assert named_at < len(rows[0].tokens), (seen, rows[0].tokens)
