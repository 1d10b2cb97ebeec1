"""A policy served as an OpenAI-compatible chat endpoint: `POST /v1/chat/completions` with
`tools` and `tool_calls`, `GET /v1/models`, `GET /health`.

Plain Python and torch, no Django (`manage.py serve_policy NAME` finds the registered policy
and starts this). A request's messages are rendered by the policy's own chat template with
the request's tools, exactly as the policy saw its episodes in training (an assistant turn
that made tool calls is written back in the policy's own call syntax by its tool parser);
the reply is parsed by the same parser into `tool_calls`, or is the message's `content`.

Requests that arrive together are generated together: every choice of every waiting request
(`n` of them, or `best_of`) is a row of one batch in one key-value cache
(training/policy/batch_generation.py), each row with its own temperature, top-p, limit and
random generator. Streaming (`stream: true`) sends each row's text as its tokens are
generated, as far as it is surely content (a tool call that may be forming is held back until
the turn is read, then sent as `tool_calls`). The HTTP side is training/policy/serving_http.py.

With a reward model (`serve_policy --reward-model`), `best_of: k` samples k candidate turns
and, where the first sample gives the final answer, returns the reward model's favourite
answer (docs/serving.md says why only answers).

Bad requests get OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`,
with a 4xx status; a field the server does not implement is refused by name, never ignored.
"""

from __future__ import annotations

import json
import logging
import queue
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training.envs.base import ANSWER_TOOL, Tool
from training.policy.conversations import ConversationError, conversation_steps, template_messages, tools_of
from training.policy.parsers import partial_suffix

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


class Batcher:
    """One thread that generates the rows of the requests waiting, together, as one batch; what
    arrives while a batch runs waits for the next (up to `max_rows` rows a batch).

    How long a batch waits to fill (a dynamic batcher's queue delay): clients that were answered
    together send again together, a few milliseconds later. A batch takes the first waiting
    request and every other that comes within `gather_seconds`; while some clients answered by
    the last batch have not sent again, it waits for them up to `fill_seconds`. So one client
    never waits on others, and clients that fell into two batches come back together into one
    instead of taking turns."""

    def __init__(
        self,
        generate: Callable[[list], None],
        *,
        max_rows: int = 32,
        gather_seconds: float = 0.001,
        fill_seconds: float = 0.02,
    ):
        self.generate, self.max_rows = generate, max_rows
        self.gather_seconds, self.fill_seconds = gather_seconds, fill_seconds
        self.waiting: queue.Queue = queue.Queue()
        self.held: tuple | None = None  # a request that did not fit the last batch: the next one's first
        self.returning = 0  # requests the last batch answered whose clients have not sent again
        self.lock = threading.Lock()
        self.sizes: list[tuple[int, int]] = []  # (requests, rows) of each batch run, the last 1,000
        self.thread = threading.Thread(target=self._loop, name="policy-batches", daemon=True)
        self.thread.start()

    def submit(self, rows: list) -> Future:
        """Generate `rows` (batch_generation.Row) in the next batch; the future is done when they are."""
        done: Future = Future()
        with self.lock:
            self.returning = max(0, self.returning - 1)
        self.waiting.put((rows, done))
        return done

    def close(self) -> None:
        self.waiting.put(None)
        self.thread.join(timeout=30)

    def _next(self, timeout: float | None) -> tuple | None:
        if self.held is not None:
            job, self.held = self.held, None
            return job
        return self.waiting.get(timeout=timeout) if timeout is None or timeout > 0 else self.waiting.get_nowait()

    def _batch(self, first: tuple) -> list[tuple]:
        jobs, rows = [first], len(first[0])
        started = time.monotonic()
        while rows < self.max_rows:
            with self.lock:
                wait = self.fill_seconds if self.returning else self.gather_seconds
            try:
                job = self._next(started + wait - time.monotonic())
            except queue.Empty:
                break
            if job is None:
                self.waiting.put(None)
                break
            if rows + len(job[0]) > self.max_rows:
                self.held = job
                break
            jobs.append(job)
            rows += len(job[0])
        return jobs

    def _loop(self) -> None:
        while (first := self._next(None)) is not None:
            jobs = self._batch(first)
            self.sizes = [*self.sizes[-999:], (len(jobs), sum(len(rows) for rows, _ in jobs))]
            try:
                self.generate([row for rows, _ in jobs for row in rows])
            except Exception as exc:  # noqa: BLE001 - each request is told; the thread serves the next
                log.exception("a batch of %d request(s) failed", len(jobs))
                outcome = exc
            else:
                outcome = None
            with self.lock:  # before the answers go out: a fast client may send again at once
                self.returning = len(jobs)
            for _, done in jobs:
                if outcome is None:
                    done.set_result(None)
                else:
                    done.set_exception(outcome)


@dataclass
class Prepared:
    """A checked request made ready to generate: its prompt, room and parser."""

    request: Request
    prompt: list[int]
    room: int
    parser: Any

    @property
    def rows(self) -> int:
        return self.request.best_of

    @property
    def streams_as_generated(self) -> bool:
        """best_of picks among finished candidates: those replies are streamed once chosen."""
        return self.request.best_of == self.request.n


@dataclass
class ReplyText:
    """One row's text as it is generated: where a stop string ends it, and what is surely content
    (streamable now: no stop string or tool call may be forming in it)."""

    decode: Callable[[list[int]], str]
    stops: list[str]
    parser: Any = None  # the request's tool-call parser; None where the request has no tools
    ids: list[int] = field(default_factory=list)
    text: str = ""
    sent: int = 0  # characters streamed

    def add(self, token: int) -> bool:
        """Take one token; True when a stop string has ended the reply."""
        self.ids.append(token)
        self.text = self.decode(self.ids)
        ends = [self.text.index(stop) for stop in self.stops if stop in self.text]
        if ends:
            self.text = self.text[: min(ends)]
        return bool(ends)

    def new_content(self) -> str:
        text = self.text.rstrip("\ufffd")  # a character whose bytes have not all come yet
        text = text[: len(text) - max((partial_suffix(text, stop) for stop in self.stops), default=0)]
        if self.parser is not None:
            text = text[: self.parser.streamable(text)]
        if len(text) <= self.sent:
            return ""
        new, self.sent = text[self.sent :], len(text)
        return new


class PolicyServer:
    """One policy (a model directory with its chat template and tool parser) answering chat requests."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        name: str,
        threads: int = 0,
        reward_model: str | Path | None = None,
        max_batch: int = 32,
    ):
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
        self.created = int(time.time())
        self.scorer = None
        if reward_model:
            from rewardmodel.scoring import RewardScorer

            self.scorer = RewardScorer(reward_model)  # raises BackboneError naming what is wrong
        self.batcher = Batcher(self._generate, max_rows=max(max_batch, MAX_CHOICES))

    def close(self) -> None:
        self.batcher.close()

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

    def prepare(self, request: Request) -> Prepared:
        """The request's prompt in the policy's template, checked against its context."""
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
        return Prepared(request, prompt, room, self.chat.parser(request.tools))

    def start(
        self, prepared: Prepared, on_text: Callable[[int, str], None] | None = None, cancelled=lambda: False
    ) -> tuple[list[ReplyText], list, Future]:
        """Queue the request's rows for the next batch: (their texts as they grow, the rows, the
        future done when every row has ended). `on_text(row, new content)` is called from the batch's thread;
        `cancelled()` true ends the rows early (a client that went away)."""
        import torch

        from training.policy.batch_generation import Row

        request = prepared.request
        parser = prepared.parser if request.tools else None
        texts = [ReplyText(self.chat.decode, request.stop, parser) for _ in range(prepared.rows)]

        def watcher(index: int):
            text = texts[index]

            def on_token(token: int) -> bool:
                if not (request.stop or on_text):
                    return cancelled()
                stopped = text.add(token)
                if on_text is not None and (new := text.new_content()):
                    on_text(index, new)
                return stopped or cancelled()

            return on_token

        rows = []
        for index in range(prepared.rows):
            seed = (request.seed + index) % 2**63 if request.seed is not None else secrets.randbits(63)
            rows.append(
                Row(
                    prompt=prepared.prompt,
                    limit=min(request.max_tokens, prepared.room),
                    temperature=request.temperature,
                    top_p=request.top_p,
                    generator=torch.Generator().manual_seed(seed),
                    on_token=watcher(index),
                )
            )
        return texts, rows, self.batcher.submit(rows)

    def complete(self, request: Request) -> dict:
        """The chat.completion object for a checked request (blocks until it is generated)."""
        prepared = self.prepare(request)
        _, rows, done = self.start(prepared)
        done.result()
        return self.completion(prepared, rows)

    def completion(self, prepared: Prepared, rows: list) -> dict:
        """The chat.completion object of a request whose rows are generated."""
        request = prepared.request
        choices, completion_tokens = [], 0
        for index, row in enumerate(rows):
            completion_tokens += len(row.tokens)
            choices.append(self._choice(index, self.chat.decode(row.tokens), row.ended, request, prepared.parser))
        if request.best_of > request.n:
            ranking = self._best(request, choices)
            choices = [{**choices[k], "index": i} for i, k in enumerate(ranking[: request.n])]
        prompt = len(prepared.prompt)
        return {
            "id": f"chatcmpl-{secrets.token_hex(12)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt + completion_tokens,
            },
        }

    def _generate(self, rows: list) -> None:
        from training.policy.batch_generation import generate_rows

        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.chat.stop_ids[0]
        generate_rows(self.model, rows, stop_ids=self.chat.stop_ids, pad_id=pad)

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


def chunk(base: dict, index: int, delta: dict, reason: str | None = None) -> dict:
    """One chat.completion.chunk of choice `index`."""
    return {**base, "choices": [{"index": index, "delta": delta, "finish_reason": reason, "logprobs": None}]}


def stream_chunks(completion: dict, include_usage: bool, *, sent: list[str] | None = None) -> list[dict]:
    """A finished completion as the chunks of a stream (role, content, tool calls, the end).
    With `sent` (each choice's content already streamed, after its role chunk), only the rest:
    the content not yet sent, the calls and the end."""
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"]}
    base["model"] = completion["model"]
    chunks = []
    for choice in completion["choices"]:
        message, index = choice["message"], choice["index"]
        content, already = message.get("content") or "", sent[index] if sent is not None else None
        if already is None:
            chunks.append(chunk(base, index, {"role": "assistant", "content": ""}))
            already = ""
        if content.startswith(already) and len(content) > len(already):
            chunks.append(chunk(base, index, {"content": content[len(already) :]}))
        for k, call in enumerate(message.get("tool_calls") or []):
            chunks.append(chunk(base, index, {"tool_calls": [{"index": k, **call}]}))
        chunks.append(chunk(base, index, {}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks
