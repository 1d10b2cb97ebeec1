"""The policy server under a burst and what frameworks send (issue 53): a prompt too large for
the context is refused by its size before it is tokenized, and the work a request's size
decides runs off the event loop, so /health and other clients are answered meanwhile; idle
kept-alive connections trickling headers neither live forever nor shut real clients out;
tool_choice "required" or a named tool and response_format are honoured (through the real
`openai` client); special tokens never reach a client; the torch threads default is safe."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import openai
import pytest

from tests.helpers import calculator_policy
from training.envs.arithmetic import ArithmeticEnvironment
from training.envs.base import EpisodeRunner
from training.policy import serving, serving_http
from training.policy.conversations import tools_of
from training.policy.json_constraint import JsonPrefix
from training.policy.parsers import CompactParser, HermesParser, Llama3JsonParser, PartialCall, SmolLM2Parser, ToolCall
from training.policy.serving import PolicyServer, default_threads, forced_prefix
from training.policy.serving_http import PolicyApp, PolicyHTTPServer
from training.policy.serving_requests import parse_request

KEY = "sk-edges"
CONNECTIONS = 8


@pytest.fixture(scope="module")
def policy_server(tmp_path_factory):
    server = PolicyServer(calculator_policy(tmp_path_factory.mktemp("edges") / "calculator"), name="calc", threads=1)
    yield server
    server.close()


@pytest.fixture(scope="module")
def port(policy_server):
    httpd = PolicyHTTPServer(PolicyApp(policy_server, KEY), "127.0.0.1", 0, max_connections=CONNECTIONS)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


@pytest.fixture(scope="module")
def client(port):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0, timeout=60)


def _task() -> tuple[list[dict], list[dict]]:
    env = ArithmeticEnvironment(seed=11, n_tasks=60)
    tools = [t.as_openai() for t in EpisodeRunner(env).tools.values()]
    return env.opening_messages(env.tasks("train")[0]), tools


def _post(port: int, body: dict) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Authorization": f"Bearer {KEY}"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    return response.status, answer


def _health_latencies(port: int, busy: threading.Thread) -> list[float]:
    """/health's latency, asked again and again while `busy` runs."""
    latencies = []
    while busy.is_alive() or not latencies:
        started = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        connection.request("GET", "/health")
        assert connection.getresponse().status == 200
        connection.close()
        latencies.append(time.monotonic() - started)
        time.sleep(0.02)
    return latencies


def test_a_prompt_too_large_for_the_context_is_refused_by_its_size_while_health_answers(port, policy_server):
    """7 MB of prompt took 57 s to tokenize on the event loop, and every client waited."""
    big = {"messages": [{"role": "user", "content": "12 * 7 = ? " * 640_000}], "max_tokens": 4}
    answers = []
    busy = threading.Thread(target=lambda: answers.append(_post(port, big)))
    started = time.monotonic()
    busy.start()
    latencies = _health_latencies(port, busy)
    busy.join()
    status, answer = answers[0]
    assert status == 400 and answer["error"]["code"] == "context_length_exceeded", answer
    assert "bytes" in answer["error"]["message"] and str(policy_server.max_prompt_bytes) in answer["error"]["message"]
    assert time.monotonic() - started < 20 and max(latencies) < 0.5, latencies


def test_a_prompt_is_tokenized_off_the_event_loop(port, policy_server, monkeypatch):
    encode = policy_server.chat.encode

    def slow(text: str) -> list[int]:  # a tokenizer that takes its time, as a real one on a long prompt
        time.sleep(1.5)
        return encode(text)

    monkeypatch.setattr(policy_server.chat, "encode", slow)
    answers = []
    body = {"messages": [{"role": "user", "content": "What is 12 * 7?"}], "max_tokens": 2}
    busy = threading.Thread(target=lambda: answers.append(_post(port, body)))
    busy.start()
    time.sleep(0.3)  # the request is being tokenized
    latencies = _health_latencies(port, busy)
    busy.join()
    assert answers[0][0] == 200 and max(latencies) < 0.5, latencies


def _kept_alive_trickling(port: int) -> socket.socket:
    """A connection that made one request and now sends its next request's headers a byte at a time."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    raw.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert raw.recv(65536).startswith(b"HTTP/1.1 200")
    raw.sendall(b"G")
    return raw


def test_idle_connections_trickling_headers_neither_shut_out_a_client_nor_live_forever(port, client, monkeypatch):
    monkeypatch.setattr(serving_http, "HEADER_SECONDS", 1.0)
    held = [_kept_alive_trickling(port) for _ in range(CONNECTIONS)]
    try:
        # As many connections as the server takes are held: a real client is still answered.
        assert [m.id for m in client.models.list().data] == ["calc"]
        # A trickling connection is closed HEADER_SECONDS after its last response, bytes or not.
        last = held[-1]
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 6 and not closed:
            try:
                last.sendall(b"E")
                time.sleep(0.2)
            except OSError:
                closed = True
                break
            last.setblocking(False)
            try:
                closed = last.recv(1024) == b""
            except BlockingIOError:
                pass
            last.setblocking(True)
        assert closed and time.monotonic() - started < 4
    finally:
        for raw in held:
            raw.close()


def test_tool_choice_required_and_a_named_tool_are_honoured(client):
    """LangChain's tool_choice="any" sends "required"; its function-calling output names the tool."""
    messages, tools = _task()
    for choice, names in [
        ("required", {"calculate", "answer"}),
        ({"type": "function", "function": {"name": "answer"}}, {"answer"}),
    ]:
        reply = client.chat.completions.create(
            model="calc", messages=messages, tools=tools, tool_choice=choice, temperature=0
        )
        first = reply.choices[0]
        assert first.finish_reason == "tool_calls" and first.message.tool_calls, first
        assert {call.function.name for call in first.message.tool_calls} <= names
        assert all(isinstance(json.loads(call.function.arguments), dict) for call in first.message.tool_calls)
    named = {"type": "function", "function": {"name": "answer"}}
    stream = client.chat.completions.create(
        model="calc", messages=messages, tools=tools, tool_choice=named, temperature=0, stream=True
    )
    streamed = [d.function.name for c in stream for ch in c.choices for d in ch.delta.tool_calls or [] if d.function]
    assert streamed == ["answer"]


def test_a_forced_call_the_policy_cannot_write_is_refused_after_its_attempts(client, port):
    messages, _ = _task()
    # A tool whose one argument must be an integer: the policy writes an expression there.
    tools = [
        {
            "type": "function",
            "function": {
                "name": "calculate",
                "description": "x",
                "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            },
        }
    ]
    # Seeded: the later attempts sample (T >= 0.7); unseeded, one of them can write a call the schema takes
    # (the test failed so once).
    body = {"messages": messages, "tools": tools, "tool_choice": "required", "max_tokens": 24, "seed": 0}
    status, answer = _post(port, body)
    assert status == 422 and answer["error"]["code"] == "invalid_model_output", answer
    assert answer["error"]["param"] == "tool_choice" and f"in {serving.ATTEMPTS} attempts" in answer["error"]["message"]
    assert 'tool_choice "auto"' in answer["error"]["message"]
    for choice, words in [
        ("sometimes", "tool_choice:"),
        ({"type": "function", "function": {"name": "search"}}, "not one of the request's tools"),
    ]:
        with pytest.raises(openai.BadRequestError, match=words):
            client.chat.completions.create(model="calc", messages=messages, tools=tools, tool_choice=choice)
    with pytest.raises(openai.BadRequestError, match="declares no tools"):
        client.chat.completions.create(model="calc", messages=messages, tool_choice="required")


def test_response_format_json_object_and_json_schema_constrain_the_reply_to_json(client):
    """LangChain's with_structured_output sends json_schema (or json_object): the reply is JSON as
    far as it goes (this tiny model never closes its object, so it ends at max_tokens)."""
    schema = {"type": "object", "properties": {"verdict": {"type": "string"}}, "required": ["verdict"]}
    formats = [
        {"type": "json_object"},
        {"type": "json_schema", "json_schema": {"name": "v", "schema": schema, "strict": True}},
    ]
    for response_format in formats:
        for stream in (False, True):
            kwargs = {"model": "calc", "max_tokens": 24, "temperature": 0, "response_format": response_format}
            messages = [{"role": "user", "content": "What is 6 * 7? Answer in JSON."}]
            if stream:
                chunks = list(client.chat.completions.create(messages=messages, stream=True, **kwargs))
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                reason = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
            else:
                reply = client.chat.completions.create(messages=messages, **kwargs)
                text, reason = reply.choices[0].message.content, [reply.choices[0].finish_reason]
            assert text.lstrip().startswith("{") and JsonPrefix().feed(text) is not None, text
            assert reason == ["length"]
    for bad, words in [
        ({"type": "json_schema", "json_schema": {"name": "v", "schema": {"type": "nonsense"}}}, "not a JSON Schema"),
        ({"type": "json_schema", "json_schema": {"name": "v", "schema": {"type": "array"}}}, "type: object"),
        ({"type": "xml"}, "json_object"),
    ]:
        with pytest.raises(openai.BadRequestError, match=words):
            client.chat.completions.create(model="calc", messages=messages, response_format=bad)


def test_special_tokens_never_reach_a_client(policy_server, client):
    """A streamed reply once carried `<|im_start|>`: the policy's special tokens are left out of content."""
    tokenizer = policy_server.tokenizer
    specials = [t for t in tokenizer.all_special_tokens if t]
    special_ids = set(tokenizer.all_special_ids) - set(policy_server.chat.stop_ids)
    body = {"messages": [{"role": "user", "content": "What is 12 * 7?"}], "temperature": 2.0, "max_tokens": 48}
    found = None
    for seed in range(20):  # a seed whose replies sample special tokens at this temperature
        prepared = policy_server.prepare(parse_request({**body, "n": 8, "seed": seed}))
        _, rows, done = policy_server.start(prepared)
        done.result()
        if any(token in special_ids for row in rows for token in row.tokens):
            found = seed
            break
    assert found is not None, "no reply sampled a special token: the test shows nothing"
    kwargs = {**body, "n": 8, "seed": found, "model": "calc"}
    replies = [c.message.content or "" for c in client.chat.completions.create(**kwargs).choices]
    streamed = "".join(
        c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **kwargs) if c.choices
    )
    assert not [s for s in specials if any(s in text for text in [*replies, streamed])], (replies, streamed)


def test_the_torch_threads_default_leaves_a_shared_machine_room(monkeypatch):
    for cores, threads in [(1, 1), (2, 1), (3, 1), (8, 4), (64, 4)]:
        monkeypatch.setattr(serving.os, "sched_getaffinity", lambda _, cores=cores: set(range(cores)))
        assert default_threads() == threads


def test_a_forced_call_starts_as_each_parser_writes_calls_up_to_the_arguments():
    tools = tools_of(
        [
            {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
            for name in ("search", "open_page")
        ]
    )
    hermes, llama, compact = HermesParser(tools), Llama3JsonParser(tools), CompactParser(tools)
    assert forced_prefix(hermes, tools, "search") == '<tool_call>\n{"name": "search", "arguments":'
    assert forced_prefix(hermes, tools, "") == '<tool_call>\n{"name":'  # the policy picks the tool
    assert forced_prefix(llama, tools, "open_page") == '{"name": "open_page", "parameters":'
    assert forced_prefix(compact, tools, "search") == "search["
    assert forced_prefix(compact, tools, "") == ""  # nothing shared: the reply is checked, and retried
    assert forced_prefix(compact, tools[:1], "") == "search["  # one tool: "required" is that tool


ARGUMENTS = [
    {"query": "Karsk observatory", "limit": 3},
    {"text": 'a "quoted" \\d8 \\ back\u00e9 \U0001f600', "nested": {"list": [1, 2.5, True, None, []], "empty": {}}},
    {"n": -12345678901234, "x": 1e-07, "flags": [False, "]", "}"]},
]


@pytest.mark.parametrize("parser", [HermesParser(), SmolLM2Parser(), Llama3JsonParser()], ids=lambda p: p.name)
@pytest.mark.parametrize("compact_json", [False, True])
def test_a_call_being_written_is_streamed_only_as_far_as_the_finished_call_says(parser, compact_json):
    """At every character of a call being written, its name once written whole, and its arguments
    as far as `json.dumps` of the finished call's surely starts (never a number that may go on, a
    half-written escape or a comma that may be the last): what is streamed is never taken back."""
    calls = [ToolCall("search", ARGUMENTS[0]), ToolCall("answer", ARGUMENTS[1]), ToolCall("x", ARGUMENTS[2])]
    text = parser.format(calls)
    if compact_json:  # as a model may write it, without the spaces json.dumps puts in
        text = text.replace('", "', '","').replace('": ', '":').replace(", ", ",")
    finished = [(call.name, json.dumps(call.arguments)) for call in parser.parse(text).calls]
    assert finished == [(call.name, json.dumps(call.arguments)) for call in calls]
    sent: list[str] = []
    for end in range(len(text) + 1):
        partial = parser.partial_calls(text[:end])
        assert len(partial) >= len(sent), text[:end]
        for k, call in enumerate(partial):
            assert call.name == finished[k][0] and finished[k][1].startswith(call.arguments), (text[:end], call)
            if k < len(sent):
                assert call.arguments.startswith(sent[k]), (text[:end], call, sent[k])
                sent[k] = call.arguments
            else:
                sent.append(call.arguments)
    assert [(call.name, call.arguments) for call in parser.partial_calls(text)] == finished
    assert parser.partial_calls('{"arguments": {"q": 1}, "na') == []  # no name yet: nothing


def test_a_compact_call_is_named_at_its_bracket_and_its_argument_streamed_without_trailing_spaces():
    tools = tools_of(
        [
            {
                "type": "function",
                "function": {"name": name, "parameters": {"type": "object", "properties": {key: {"type": kind}}}},
            }
            for name, key, kind in (("search", "query", "string"), ("page", "number", "integer"))
        ]
    )
    compact = CompactParser(tools)
    assert compact.partial_calls("search") == []  # it may still be the word "searching"
    assert compact.partial_calls("search[ Karsk ") == [PartialCall("search", '{"query": "Karsk')]
    assert compact.partial_calls("search[ a] b] ") == [PartialCall("search", '{"query": "a] b')]
    assert compact.partial_calls("page[12") == [PartialCall("page", "")]  # 12 may become 123


def test_a_streamed_call_the_finished_reply_does_not_make_ends_the_stream_with_an_error():
    """A call whose name went out but that the finished reply does not make (its arguments not what
    the schema takes, say): the stream ends with an error event, never a message other than the reply."""
    completion = {"id": "c", "created": 0, "model": "calc", "usage": {}}
    text_reply = {"index": 0, "message": {"role": "assistant", "content": "search[ 7"}, "finish_reason": "length"}
    begun = [[serving.StreamedCall("call_1", "search", '{"query": "7')]]
    with pytest.raises(serving.RequestError, match="began a call of search") as refused:
        serving.stream_chunks({**completion, "choices": [text_reply]}, False, sent=[""], calls=begun)
    assert refused.value.body()["error"]["code"] == "invalid_model_output"
    call = {"id": "call_2", "type": "function", "function": {"name": "search", "arguments": '{"query": "7"}'}}
    made = {"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]}}
    chunks = serving.stream_chunks(
        {**completion, "choices": [{**made, "finish_reason": "tool_calls"}]}, False, sent=[""], calls=begun
    )
    assert [c["choices"][0]["delta"] for c in chunks] == [
        {"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]},
        {},
    ]
