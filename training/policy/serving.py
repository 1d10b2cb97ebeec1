"""A policy served as an OpenAI-compatible chat endpoint: `POST /v1/chat/completions` with
`tools` and `tool_calls`, `GET /v1/models`, `GET /health`.

Plain Python and torch, no Django (`manage.py serve_policy NAME` finds the registered policy
and starts this). A request's messages are rendered by the policy's own chat template with
the request's tools, exactly as the policy saw its episodes in training (an assistant turn
that made tool calls is written back in the policy's own call syntax by its tool parser);
the reply is parsed by the same parser into `tool_calls`, or is the message's `content`.
Streaming (`stream: true`) sends the finished reply as server-sent chunks, the way OpenAI's
clients read them. One generation at a time (a lock): the model is small and its threads
are set at start.

With a reward model (`serve_policy --reward-model`), `best_of: k` samples k candidate turns
and, where the first sample gives the final answer, returns the reward model's favourite
answer (docs/serving.md says why only answers).

Bad requests get OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`,
with a 4xx status; a field the server does not implement is refused by name, never ignored.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from core import json_input
from training.envs.base import ANSWER_TOOL, Tool
from training.policy.conversations import ConversationError, conversation_steps, template_messages, tools_of

log = logging.getLogger(__name__)

MAX_BODY = 8 * 2**20
DEFAULT_MAX_TOKENS = 256
MAX_CHOICES = 8
# Fields the endpoint implements, and those it accepts only at the value that changes nothing.
FIELDS = {
    "model",
    "messages",
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "n",
    "stream",
    "stream_options",
    "seed",
    "stop",
    "user",
    "parallel_tool_calls",
    "metadata",
    "store",
    "best_of",
}
# The Responses API (the OpenAI Agents SDK's default) is not served: its clients are told how to switch.
RESPONSES_REFUSAL = (
    "this server implements the Chat Completions API (POST /v1/chat/completions), not the Responses API; "
    "in the OpenAI Agents SDK use OpenAIChatCompletionsModel or set_default_openai_api('chat_completions') "
    "(docs/serving.md)"
)
NEUTRAL = {"frequency_penalty": 0, "presence_penalty": 0, "logprobs": False, "response_format": {"type": "text"}}


class RequestError(ValueError):
    """A request the endpoint refuses: the message, the field, and the HTTP status."""

    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.param, self.status, self.code = param, status, code

    def body(self) -> dict:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        if self.status == 401:
            kind = "authentication_error"
        return {"error": {"message": str(self), "type": kind, "param": self.param, "code": self.code}}


@dataclass
class Request:
    messages: list[dict]
    tools: list[Tool]
    temperature: float
    top_p: float
    max_tokens: int
    n: int
    stream: bool
    include_usage: bool
    seed: int | None
    stop: list[str]
    best_of: int = 1
    parallel_tool_calls: bool = True


def _number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise RequestError(f"{name}: a number from {low:g} to {high:g}", name)
    return float(value)


def _integer(body: dict, name: str, default: int | None, low: int, high: int) -> int | None:
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RequestError(f"{name}: a whole number from {low} to {high}", name)
    return value


def _top_p(body: dict) -> float:
    value = _number(body, "top_p", 1.0, 0.0, 1.0)
    if value == 0:
        raise RequestError("top_p: above 0, at most 1", "top_p")
    return value


def _tools(raw: Any) -> list[Tool]:
    try:
        return tools_of(raw)
    except ConversationError as exc:
        raise RequestError(str(exc), exc.param) from None


def parse_request(body: Any) -> Request:
    """The request's fields checked; raises RequestError naming the first problem."""
    if not isinstance(body, dict):
        raise RequestError("the body: a JSON object")
    unknown = sorted(set(body) - FIELDS - set(NEUTRAL))
    if unknown:
        raise RequestError(f"{unknown[0]}: not implemented by this server", unknown[0])
    for name, neutral in NEUTRAL.items():
        if name in body and body[name] not in (None, neutral):
            raise RequestError(f"{name}: only {json.dumps(neutral)} is implemented by this server", name)
    if "model" in body and not isinstance(body["model"], str):
        raise RequestError("model: a string", "model")
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool) and parallel is not None:
        raise RequestError("parallel_tool_calls: true or false", "parallel_tool_calls")
    tools = _tools(body.get("tools"))
    choice = body.get("tool_choice", "auto")
    if choice not in (None, "auto", "none"):
        raise RequestError("tool_choice: 'auto' or 'none' (a policy is not forced to call)", "tool_choice")
    if choice == "none":
        tools = []
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages: a non-empty list of {role, content}", "messages")
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop or []
    if not isinstance(stops, list) or len(stops) > 4 or not all(isinstance(s, str) and s for s in stops):
        raise RequestError("stop: a string or up to 4 strings", "stop")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise RequestError("stream_options: an object", "stream_options")
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise RequestError("stream: true or false", "stream")
    limit = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    n = _integer(body, "n", 1, 1, MAX_CHOICES)
    best_of = _integer(body, "best_of", n, 1, MAX_CHOICES)
    if best_of < n:
        raise RequestError(f"best_of: at least n ({n}); the best n of best_of candidates are returned", "best_of")
    return Request(
        messages=messages,
        tools=tools,
        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=_top_p(body),
        max_tokens=_integer(body, limit, DEFAULT_MAX_TOKENS, 1, 1_000_000),
        n=n,
        stream=bool(stream),
        include_usage=bool(options.get("include_usage")),
        seed=_integer(body, "seed", None, -(2**63), 2**63 - 1),
        stop=stops,
        best_of=best_of,
        parallel_tool_calls=parallel is not False,
    )


class PolicyServer:
    """One policy (a model directory with its chat template and tool parser) answering chat requests."""

    def __init__(self, model_dir: str | Path, *, name: str, threads: int = 0, reward_model: str | Path | None = None):
        import torch

        from training.policy.chat import ChatFormat
        from training.policy.model_io import load_policy

        if threads:
            torch.set_num_threads(threads)
        self.name = name
        self.model, self.tokenizer = load_policy(Path(model_dir))
        self.model.eval()
        self.chat = ChatFormat.for_policy(self.tokenizer, model_dir)
        self.context = int(getattr(self.model.config, "max_position_embeddings", 0) or 4096)
        self.lock = threading.Lock()
        self.created = int(time.time())
        self.scorer = None
        if reward_model:
            from rewardmodel.scoring import RewardScorer

            self.scorer = RewardScorer(reward_model)  # raises BackboneError naming what is wrong

    # Messages -------------------------------------------------------------------------

    def _template_messages(self, messages: list, tools: list[Tool]) -> list[dict]:
        """OpenAI messages as the policy's template saw them in training (conversations.py, the
        rendering fine-tuning runs train on)."""
        try:
            return template_messages(messages, tools, self.chat.parser(tools))
        except ConversationError as exc:
            raise RequestError(str(exc), exc.param) from None

    # Completion -----------------------------------------------------------------------

    def model_problem(self, body: Any) -> RequestError | None:
        """A request for another model than the one served, refused as OpenAI refuses an unknown
        model (404, `model_not_found`): a client pointed at the wrong server must not get this
        policy's answers under another name."""
        model = body.get("model") if isinstance(body, dict) else None
        if isinstance(model, str) and model != self.name:
            return RequestError(
                f"The model {model[:200]!r} does not exist on this server; it serves {self.name!r} (GET /v1/models).",
                "model",
                status=404,
                code="model_not_found",
            )
        return None

    def complete(self, request: Request) -> dict:
        """The chat.completion object for a checked request."""
        from training.policy.chat import ChatTemplateError

        messages = self._template_messages(request.messages, request.tools)
        openai_tools = [t.as_openai() for t in request.tools]
        try:
            prompt = self.chat.opening(messages, openai_tools)
        except ChatTemplateError as exc:
            raise RequestError(str(exc), "messages") from None
        room = self.context - len(prompt)
        if room < 1:
            raise RequestError(
                f"the prompt is {len(prompt)} tokens; this policy's context holds {self.context}",
                "messages",
                code="context_length_exceeded",
            )
        if request.best_of > request.n and self.scorer is None:
            raise RequestError("best_of: this server has no reward model (serve_policy --reward-model)", "best_of")
        parser = self.chat.parser(request.tools)
        choices, completion_tokens = [], 0
        with self.lock:
            for index in range(request.best_of):
                ids, ended = self._generate(prompt, request, min(request.max_tokens, room), index)
                completion_tokens += len(ids)
                choices.append(self._choice(index, self.chat.decode(ids), ended, request, parser))
            ranking = self._best(request, choices) if request.best_of > request.n else None
        if ranking is not None:
            choices = [{**choices[k], "index": i} for i, k in enumerate(ranking[: request.n])]
        return {
            "id": f"chatcmpl-{secrets.token_hex(12)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": completion_tokens,
                "total_tokens": len(prompt) + completion_tokens,
            },
        }

    def _best(self, request: Request, choices: list[dict]) -> list[int]:
        """The candidates' indices in the order they are returned. The first sample decides what
        the turn does, as without best_of; where it gives the final answer, the answers among
        the candidates are ranked by the reward model's score of the episode each would end
        (the request's messages and that answer, recorded as the runner records an episode:
        conversations.conversation_steps), best first, then the other candidates in sampling
        order. A turn that calls a tool is left as sampled: the reward model was trained on
        finished episodes, and scoring unfinished ones beside finished ones favoured answering
        at once (measured through the API: best-of-4 over every turn fell from 20% to 6%,
        benchmarks/RESULTS.md, issue 43)."""
        answers = [k for k, choice in enumerate(choices) if self._is_answer(choice["message"], request)]
        if 0 not in answers:
            return list(range(len(choices)))
        items = [
            conversation_steps([*request.messages, choices[k]["message"]], request.tools, answer_tool=ANSWER_TOOL.name)
            for k in answers
        ]
        scores = dict(zip(answers, self.scorer.score_episodes(items)))
        ranked = sorted(answers, key=lambda k: -scores[k])
        return ranked + [k for k in range(len(choices)) if k not in scores]

    @staticmethod
    def _is_answer(message: dict, request: Request) -> bool:
        """Whether a reply ends the episode, by the rule that records it (`conversation_steps`):
        a call of the answer tool, or plain text where the tools have one or there are none."""
        _, steps = conversation_steps([message], request.tools, answer_tool=ANSWER_TOOL.name)
        return any(step["kind"] == "answer" for step in steps)

    def _generate(self, prompt: list[int], request: Request, limit: int, index: int) -> tuple[list[int], bool]:
        """New token ids (without the end-of-turn token), and whether the turn ended by itself."""
        import torch

        if request.seed is not None:
            torch.manual_seed((request.seed + index) % 2**63)
        sample = request.temperature > 0
        with torch.no_grad():
            out = self.model.generate(
                torch.tensor([prompt]),
                attention_mask=torch.ones((1, len(prompt)), dtype=torch.long),
                max_new_tokens=limit,
                do_sample=sample,
                temperature=request.temperature if sample else None,
                top_p=request.top_p if sample else None,
                top_k=None,
                eos_token_id=self.chat.stop_ids,
                pad_token_id=self.tokenizer.pad_token_id or self.chat.stop_ids[0],
            )
        new = out[0, len(prompt) :].tolist()
        ended = bool(new) and new[-1] in self.chat.stop_ids
        return (new[:-1] if ended else new), ended

    @staticmethod
    def _choice(index: int, text: str, ended: bool, request: Request, parser) -> dict:
        for stop in request.stop:
            if stop in text:
                text, ended = text[: text.index(stop)], True
        parsed = parser.parse(text) if request.tools else None
        if parsed is not None and parsed.calls and not parsed.problem and _declared(parsed.calls, request.tools):
            kept = parsed.calls if request.parallel_tool_calls else parsed.calls[:1]
            calls = [
                {
                    "id": f"call_{secrets.token_hex(8)}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments, allow_nan=False)},
                }
                for call in kept
            ]
            message = {"role": "assistant", "content": parsed.content or None, "tool_calls": calls}
            reason = "tool_calls"
        else:
            message = {"role": "assistant", "content": text}
            reason = "stop" if ended else "length"
        return {"index": index, "message": message, "finish_reason": reason, "logprobs": None}


def _declared(calls, tools: list[Tool]) -> bool:
    """Whether every call is of a tool the request declared, with arguments its JSON Schema
    takes (and plain JSON: no NaN or Infinity). A reply that calls anything else cannot be
    dispatched by the client's agent framework: it is returned as text, as the model wrote it."""
    import jsonschema

    schemas = {tool.name: tool.parameters for tool in tools}
    for call in calls:
        if call.name not in schemas or not isinstance(call.arguments, dict):
            return False
        try:
            json.dumps(call.arguments, allow_nan=False)
            if next(jsonschema.Draft202012Validator(schemas[call.name]).iter_errors(call.arguments), None):
                return False
        except (ValueError, TypeError, jsonschema.exceptions.SchemaError):
            return False
    return True


def stream_chunks(completion: dict, include_usage: bool) -> list[dict]:
    """A finished completion as the chunks of a stream (role, content, tool calls, the end)."""
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"]}
    base["model"] = completion["model"]
    chunks = []
    for choice in completion["choices"]:
        message, index = choice["message"], choice["index"]

        def chunk(delta: dict, reason=None, index=index) -> dict:
            return {**base, "choices": [{"index": index, "delta": delta, "finish_reason": reason, "logprobs": None}]}

        chunks.append(chunk({"role": "assistant", "content": ""}))
        if message.get("content"):
            chunks.append(chunk({"content": message["content"]}))
        for k, call in enumerate(message.get("tool_calls") or []):
            chunks.append(chunk({"tool_calls": [{"index": k, **call}]}))
        chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks


def make_handler(server: PolicyServer, api_key: str | None):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: with Nagle's algorithm the body waited for the
        # client's delayed ACK, 40 ms a request (benchmarks/serve_policy.py).
        disable_nagle_algorithm = True

        def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
            pass

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refuse(self, error: RequestError) -> None:
            self._send(error.status, error.body())

        def _authorised(self) -> bool:
            if not api_key:
                return True
            given = self.headers.get("Authorization", "")
            if secrets.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
                return True
            self._refuse(RequestError("a valid API key: Authorization: Bearer KEY", status=401))
            return False

        def do_GET(self):  # noqa: N802 - the stdlib's name
            path = self.path.split("?")[0].rstrip("/")
            if path == "/health":
                return self._send(200, {"status": "ok", "model": server.name})
            if not self._authorised():
                return None
            if path == "/v1/models":
                model = {"id": server.name, "object": "model", "created": server.created, "owned_by": "arbiter"}
                return self._send(200, {"object": "list", "data": [model]})
            if path == f"/v1/models/{server.name}":
                return self._send(200, {"id": server.name, "object": "model", "created": server.created})
            if path == "/v1/responses":
                return self._refuse(RequestError(RESPONSES_REFUSAL, status=404))
            if path == "/v1/chat/completions":  # the route exists; it takes POST
                return self._refuse(RequestError("method not allowed: POST a chat completion request", status=405))
            return self._refuse(RequestError(f"no route {path}", status=404))

        def do_POST(self):  # noqa: N802
            path = self.path.split("?")[0].rstrip("/")
            try:
                size = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                size = -1
            if size < 0 or size > MAX_BODY:
                self.close_connection = True
                return self._refuse(RequestError(f"a body of at most {MAX_BODY} bytes", status=413))
            raw = self.rfile.read(size)
            if not self._authorised():
                return None
            if path == "/v1/responses":
                return self._refuse(RequestError(RESPONSES_REFUSAL, status=404))
            if path != "/v1/chat/completions":
                return self._refuse(RequestError(f"no route {path}", status=404))
            try:
                body = json_input.loads(raw)
                if problem := server.model_problem(body):
                    return self._refuse(problem)
                request = parse_request(body)
                completion = server.complete(request)
            except json_input.JsonInputError as exc:
                return self._refuse(RequestError(f"the body: {exc}"))
            except RequestError as exc:
                return self._refuse(exc)
            except Exception as exc:  # noqa: BLE001 - a fault of the server, answered rather than dropped
                log.exception("chat completion failed")
                return self._refuse(RequestError(f"the server failed: {type(exc).__name__}: {exc}", status=500))
            if not request.stream:
                return self._send(200, completion)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for item in stream_chunks(completion, request.include_usage):
                self.wfile.write(f"data: {json.dumps(item)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            return None

        def do_PUT(self):  # noqa: N802
            self._refuse(RequestError("method not allowed", status=405))

        do_DELETE = do_PATCH = do_OPTIONS = do_PUT  # OpenAI's error shape, not the stdlib's 501 page

    return Handler


def serve(server: PolicyServer, host: str, port: int, api_key: str | None = None) -> ThreadingHTTPServer:
    """An HTTP server for `server` (call `serve_forever()` on it; `shutdown()` stops it)."""
    httpd = ThreadingHTTPServer((host, port), make_handler(server, api_key))
    httpd.daemon_threads = True
    return httpd
