"""A policy served as an OpenAI-compatible chat endpoint: `POST /v1/chat/completions` with
`tools` and `tool_calls`, `GET /v1/models`, `GET /health`.

Plain Python and torch, no Django (`manage.py serve_policy NAME` finds the registered policy
and starts this). A request's messages are rendered by the policy's own chat template with
the request's tools, exactly as the policy saw its episodes in training (an assistant turn
that made tool calls is written back in the policy's own call syntax by its tool parser);
the reply is parsed by the same parser into `tool_calls`, or is the message's `content`.

Requests are generated together, in one running batch (continuous batching): every choice of
every request (`n` of them, or `best_of`) is a row of one key-value cache
(training/policy/batch_generation.py), each row with its own temperature, top-p, limit and
random generator; a request that arrives while the batch runs joins it between two tokens
(`Batcher`), and is answered as soon as its own rows end. Streaming (`stream: true`) sends each
row's content as its tokens are generated, and a tool call's name as soon as it is written, then
its arguments in parts as they will be in the finished call (`ReplyText`); what a client
accumulates is the reply not streamed. The HTTP side is training/policy/serving_http.py.

With a reward model (`serve_policy --reward-model`), `best_of: k` samples k candidate turns
and, where the first sample gives the final answer, returns the reward model's favourite
answer (docs/serving.md says why only answers).

Bad requests get OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`,
with a 4xx status; a field the server does not implement is refused by name, never ignored
(training/policy/serving_requests.py checks a request). `tool_choice` "required" or a named
tool is honoured by writing the start of the call in the policy's syntax (`forced_prefix`),
a JSON `response_format` by constrained decoding (training/policy/json_constraint.py; a
json_schema's keys, types and enums too, training/policy/json_schema_prefix.py); a
reply that still does not do what was asked is generated again, then refused (422). Special
tokens never reach a client (`decode`).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from core import json_input
from rewardmodel.scoring import RewardScorer
from training.envs.base import ANSWER_TOOL, Tool
from training.policy.batch_generation import Row, generate_rows
from training.policy.chat import ChatFormat, ChatTemplateError
from training.policy.conversations import ConversationError, conversation_steps, template_messages
from training.policy.json_constraint import JsonConstraint, JsonPrefix
from training.policy.json_schema_prefix import SchemaPrefix
from training.policy.model_io import load_policy
from training.policy.parsers import ToolCall, partial_suffix
from training.policy.serving_requests import MAX_CHOICES, Request, RequestError

log = logging.getLogger(__name__)

ATTEMPTS = 3  # generations of a row whose reply must be a tool call or JSON before the request is refused
# Text a tool-call parser reads: kept in a reply although the tokenizer may call it special.
PARSER_MARKERS = ("<tool_call>", "</tool_call>", "<|python_tag|>", "<think>", "</think>")


def default_threads() -> int:
    """Torch threads for a served policy: half the cores it may use, at least 1 and at most 4.
    torch's own default (every core) oversubscribes a machine shared with other work: two
    servers of two threads each on two cores cost 7 times the CPU per generation (issue 53)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(4, cores // 2))


class Batcher:
    """One thread generating the rows of every request in one running batch (continuous
    batching): requests that arrive while the batch runs join it between two tokens (`admit`, up
    to `max_rows` rows), and each is answered as soon as its own rows have ended (`left`),
    whatever the other rows still have to write.

    When requests start or join a batch: a new batch takes the first waiting request and every
    other that comes within `gather_seconds`; while clients answered lately have not sent again,
    it waits for them up to `fill_seconds`. Requests waiting beside a running batch join it once
    every client answered lately has sent again, or once the first of them has waited
    `join_seconds` (the batch goes on meanwhile): clients answered together come back some
    milliseconds apart, and each join costs a pass of the model over the joining prompts. With
    5 ms, 16 clients joined 4.3-4.6 rows at a time and got 0.39-0.59x a padded `generate`; with
    20 ms, 8.4-10 rows and 0.54-0.80x (benchmarks/serve_concurrent.py, issue 56)."""

    def __init__(
        self,
        generate: Callable[[list], None],
        *,
        max_rows: int = 32,
        gather_seconds: float = 0.001,
        fill_seconds: float = 0.02,
        join_seconds: float = 0.02,
    ):
        self.generate, self.max_rows = generate, max_rows
        self.gather_seconds, self.fill_seconds, self.join_seconds = gather_seconds, fill_seconds, join_seconds
        self.waiting: queue.Queue = queue.Queue()
        self.pending: list[tuple] = []  # requests taken from `waiting`, not yet started: (rows, future, when sent)
        self.closing = False
        self.returning = 0  # requests answered whose clients have not sent again
        self.lock = threading.Lock()
        self.jobs: dict[int, list] = {}  # id(row) -> [rows not yet ended, future] of its request, this run
        self.live = 0  # rows in the running batch
        self.joined = 0  # requests admitted into a running batch
        self.sizes: list[tuple[int, int]] = []  # (requests, rows) of each start or join of a batch, the last 1,000
        self.thread = threading.Thread(target=self._loop, name="policy-batches", daemon=True)
        self.thread.start()

    def submit(self, rows: list) -> Future:
        """Generate `rows` (batch_generation.Row) in the running batch, or the next; the future is done when they are."""
        done: Future = Future()
        with self.lock:
            self.returning = max(0, self.returning - 1)
        self.waiting.put((rows, done, time.monotonic()))
        return done

    def close(self) -> None:
        self.waiting.put(None)
        self.thread.join(timeout=30)

    def admit(self) -> list:
        """The rows of the requests waiting that join the running batch now, as many as fit beside
        its rows (called by the generation between two tokens, on this thread)."""
        self._take(0)
        if not self.pending:
            return []
        with self.lock:
            back = self.returning == 0
        if not (back or time.monotonic() - self.pending[0][2] >= self.join_seconds):
            return []
        jobs = self._fitting(self.max_rows - self.live)
        self.joined += len(jobs)
        return self._start(jobs)

    def left(self, row) -> None:
        """A row has ended: its request is answered once all its rows have."""
        self.live -= 1
        job = self.jobs.pop(id(row), None)
        if job is not None:
            job[0] -= 1
            if job[0] == 0:
                self._answer(job[1])

    def _answer(self, done: Future, outcome: Exception | None = None) -> None:
        with self.lock:  # before the answer goes out: a fast client may send again at once
            self.returning += 1
        if outcome is None:
            done.set_result(None)
        else:
            done.set_exception(outcome)

    def _take(self, timeout: float | None) -> None:
        """Move what waits in the queue to `pending`: at least one request within `timeout` seconds
        (None: however long), then whatever else is there."""
        while not self.closing:
            try:
                job = self.waiting.get(timeout=timeout) if timeout is None or timeout > 0 else self.waiting.get_nowait()
            except queue.Empty:
                return
            if job is None:
                self.closing = True
                return
            self.pending.append(job)
            timeout = 0

    def _fitting(self, room: int) -> list[tuple]:
        """The pending requests, first come first, up to `room` rows."""
        jobs = []
        while self.pending and len(self.pending[0][0]) <= room:
            jobs.append(self.pending.pop(0))
            room -= len(jobs[-1][0])
        return jobs

    def _start(self, jobs: list[tuple]) -> list:
        """The jobs' rows, counted as running."""
        rows = [row for job_rows, *_ in jobs for row in job_rows]
        for job_rows, done, _ in jobs:
            job = [len(job_rows), done]
            self.jobs.update((id(row), job) for row in job_rows)
            if not job_rows:
                self._answer(done)
        self.live += len(rows)
        if jobs:
            self.sizes = [*self.sizes[-999:], (len(jobs), len(rows))]
        return rows

    def _batch(self) -> list[tuple]:
        """The requests a new batch starts with (`pending` holds at least one)."""
        started = time.monotonic()
        while sum(len(job[0]) for job in self.pending) < self.max_rows and not self.closing:
            with self.lock:
                wait = self.fill_seconds if self.returning else self.gather_seconds
            before = len(self.pending)
            self._take(started + wait - time.monotonic())
            if len(self.pending) == before:
                break
        with self.lock:  # those that did not come back by now are not waited for again
            self.returning = 0
        return self._fitting(self.max_rows)

    def _loop(self) -> None:
        while True:
            if not self.pending:
                self._take(None)
            if not self.pending:  # closed
                return
            rows = self._start(self._batch())
            outcome = None
            try:
                self.generate(rows)
            except Exception as exc:  # each request is told; the thread serves the next
                log.exception("a batch of %d row(s) failed", len(rows))
                outcome = exc
            # Requests whose rows the generation did not report (a generation without `left`) or that failed.
            unanswered = {id(job): job for job in self.jobs.values()}
            self.jobs, self.live = {}, 0
            for _, done in unanswered.values():
                self._answer(done, outcome)


@dataclass
class Prepared:
    """A checked request made ready to generate: its prompt, room and parser."""

    request: Request
    prompt: list[int]
    room: int
    parser: Any
    prefix: str = ""  # the start of a forced tool call, put in the reply before the policy goes on

    @property
    def rows(self) -> int:
        return self.request.best_of

    @property
    def streams_as_generated(self) -> bool:
        """best_of picks among finished candidates, and a forced call or a JSON reply is checked
        (and may be generated again) before it is sent: those replies are streamed once ready."""
        request = self.request
        return request.best_of == request.n and request.forced is None and not request.json


@dataclass
class StreamedCall:
    """A tool call as far as it has been streamed: its id, its name, its arguments sent so far."""

    id: str
    name: str
    arguments: str = ""


@dataclass
class ReplyText:
    """One row's text as it is generated: where a stop string ends it, and what of it is sure
    (streamable now, `new_deltas`): content no stop string or tool call may be forming in, and
    the calls of the request's tools whose names are written, with their arguments as they come."""

    decode: Callable[[list[int]], str]
    stops: list[str]
    parser: Any = None  # the request's tool-call parser; None where the request has no tools
    tools: frozenset[str] = frozenset()  # the names of the request's tools: only their calls are streamed
    most_calls: int | None = None  # 1 with parallel_tool_calls false: the reply keeps only its first call
    ids: list[int] = field(default_factory=list)
    text: str = ""
    sent: int = 0  # characters of content streamed
    calls: list[StreamedCall] = field(default_factory=list)

    def add(self, token: int) -> bool:
        """Take one token; True when a stop string has ended the reply."""
        self.ids.append(token)
        self.text = self.decode(self.ids)
        ends = [self.text.index(stop) for stop in self.stops if stop in self.text]
        if ends:
            self.text = self.text[: min(ends)]
        return bool(ends)

    def new_deltas(self) -> list[dict]:
        """What is new and sure since the last call, as a stream's deltas: content; a call's id and
        name once its name is written; then its arguments, in parts, as they will be in the reply."""
        text = self.text.rstrip("\ufffd")  # a character whose bytes have not all come yet
        text = text[: len(text) - max((partial_suffix(text, stop) for stop in self.stops), default=0)]
        deltas = []
        content = text[: self.parser.streamable(text)] if self.parser is not None else text
        if len(content) > self.sent:
            deltas.append({"content": content[self.sent :]})
            self.sent = len(content)
        return deltas + (self._call_deltas(text) if self.parser is not None else [])

    def _call_deltas(self, text: str) -> list[dict]:
        deltas = []
        for k, call in enumerate(self.parser.partial_calls(text)[: self.most_calls]):
            if k == len(self.calls):
                if call.name not in self.tools:  # returned as text: a client cannot dispatch it
                    break
                self.calls.append(StreamedCall(f"call_{secrets.token_hex(8)}", call.name))
                opening = {"index": k, "id": self.calls[k].id, "type": "function"}
                deltas.append({"tool_calls": [{**opening, "function": {"name": call.name, "arguments": ""}}]})
            streamed = self.calls[k]
            if call.name != streamed.name or not call.arguments.startswith(streamed.arguments):
                break
            if len(call.arguments) > len(streamed.arguments):
                part = call.arguments[len(streamed.arguments) :]
                deltas.append({"tool_calls": [{"index": k, "function": {"arguments": part}}]})
                streamed.arguments = call.arguments
        return deltas


class PolicyServer:
    """One policy (a model directory with its chat template and tool parser) answering chat requests."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        name: str,
        threads: int | None = None,
        reward_model: str | Path | None = None,
        max_batch: int = 32,
    ):
        import torch

        threads = default_threads() if threads is None else threads
        if threads:  # 0: torch's own default, every core
            torch.set_num_threads(threads)
        self.threads = torch.get_num_threads()
        self.name = name
        self.model, self.tokenizer = load_policy(Path(model_dir))
        self.model.eval()
        self.chat = ChatFormat.for_policy(self.tokenizer, model_dir)
        self.context = int(getattr(self.model.config, "max_position_embeddings", 0) or 4096)
        # A prompt longer than this in bytes cannot fit the context: no token of the vocabulary
        # holds more bytes than its longest (for tokenizers that keep every byte of the text, as
        # byte-level BPE and SentencePiece with byte fallback do). Refused before it is tokenized.
        vocab = self.tokenizer.get_vocab()
        self.max_prompt_bytes = self.context * max(len(token.encode()) for token in vocab)
        # Special tokens never reach a client (a stream once carried `<|im_start|>`), except the
        # markers a tool-call parser reads.
        special = set(self.tokenizer.all_special_ids) | {
            i for i, token in getattr(self.tokenizer, "added_tokens_decoder", {}).items() if token.special
        }
        self.hidden_ids = (special - {vocab[m] for m in PARSER_MARKERS if m in vocab}) | set(self.chat.stop_ids)
        self.token_texts: dict[int, str] = {}  # each token's text alone, for JSON-constrained rows
        self.created = int(time.time())
        self.scorer = None
        if reward_model:
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

    def decode(self, ids: list[int]) -> str:
        """A reply's text: without end-of-turn or other special tokens (the parser's markers kept)."""
        return self.tokenizer.decode([i for i in ids if i not in self.hidden_ids], skip_special_tokens=False)

    def prepare(self, request: Request) -> Prepared:
        """The request's prompt in the policy's template, checked against its context: first by
        its size in bytes (a prompt of megabytes took a minute to tokenize), then in tokens. The
        HTTP side calls this off its event loop."""
        messages = self._template_messages(request.messages, request.tools)
        openai_tools = [t.as_openai() for t in request.tools]
        try:
            text = self.chat.render(messages, openai_tools, add_generation_prompt=True)
        except ChatTemplateError as exc:
            raise RequestError(str(exc), "messages") from None
        if (size := len(text.encode())) > self.max_prompt_bytes:
            raise RequestError(
                f"the prompt is {size} bytes; this policy's context holds {self.context} tokens, "
                f"at most {self.max_prompt_bytes} bytes of text",
                "messages",
                code="context_length_exceeded",
            )
        parser = self.chat.parser(request.tools)
        prefix = forced_prefix(parser, request.tools, request.forced) if request.forced is not None else ""
        prompt = self.chat.encode(text) + self.chat.encode(prefix)
        room = self.context - len(prompt)
        if room < 1:
            raise RequestError(
                f"the prompt is {len(prompt)} tokens; this policy's context holds {self.context}",
                "messages",
                code="context_length_exceeded",
            )
        if request.best_of > request.n and self.scorer is None:
            raise RequestError("best_of: this server has no reward model (serve_policy --reward-model)", "best_of")
        return Prepared(request, prompt, room, parser, prefix)

    def start(
        self, prepared: Prepared, on_delta: Callable[[int, dict], None] | None = None, cancelled=lambda: False
    ) -> tuple[list[ReplyText], list, Future]:
        """Queue the request's rows for the running batch: (their texts as they grow, the rows, the
        future done when every row has ended). `on_delta(row, delta)` is called from the batch's
        thread with what is new and sure of a row's reply (`ReplyText.new_deltas`); `cancelled()`
        true ends the rows early (a client that went away)."""
        request = prepared.request
        parser = prepared.parser if request.tools else None
        tools = frozenset(tool.name for tool in request.tools)
        most = None if request.parallel_tool_calls else 1
        texts = [ReplyText(self.decode, request.stop, parser, tools, most) for _ in range(prepared.rows)]

        def watcher(index: int):
            text = texts[index]

            def on_token(token: int) -> bool:
                if not (request.stop or on_delta):
                    return cancelled()
                stopped = text.add(token)
                if on_delta is not None:
                    for delta in text.new_deltas():
                        on_delta(index, delta)
                return stopped or cancelled()

            return on_token

        rows = [self._row(prepared, index, watcher(index)) for index in range(prepared.rows)]
        return texts, rows, self.batcher.submit(rows)

    def _row(self, prepared: Prepared, index: int, on_token=None, attempt: int = 0):
        """Row `index` of a request; a later attempt draws again with another seed, sampling
        (temperature 0.7 at least: a greedy row would write the same reply again)."""
        import torch

        request = prepared.request
        seed = request.seed + index + attempt * MAX_CHOICES if request.seed is not None else secrets.randbits(63)
        constraint = None
        if request.json:
            constraint = JsonConstraint(
                self._token_text,
                self.chat.stop_ids,
                banned=self.hidden_ids - set(self.chat.stop_ids),
                state=SchemaPrefix(request.schema) if request.schema else JsonPrefix(),
            )
            constraint.cache = self.token_texts
        return Row(
            prompt=prepared.prompt,
            limit=min(request.max_tokens, prepared.room),
            temperature=max(request.temperature, 0.7) if attempt else request.temperature,
            top_p=request.top_p,
            generator=torch.Generator().manual_seed(seed % 2**63),
            on_token=on_token,
            constraint=constraint,
        )

    def _token_text(self, token: int) -> str:
        return self.tokenizer.decode([token], skip_special_tokens=False)

    def complete(self, request: Request) -> dict:
        """The chat.completion object for a checked request (blocks until it is generated)."""
        prepared = self.prepare(request)
        _, rows, done = self.start(prepared)
        done.result()
        return self.completion(prepared, rows)

    def completion(self, prepared: Prepared, rows: list) -> dict:
        """The chat.completion object of a request whose rows are generated. A reply that must be
        a tool call or JSON and is not is generated again (ATTEMPTS in all), then refused (422)."""
        request = prepared.request
        rows = list(rows)
        choices = [self._reply(prepared, index, row) for index, row in enumerate(rows)]
        for attempt in range(1, ATTEMPTS + 1):
            failed = {k: problem for k, c in enumerate(choices) if (problem := self._problem(c, request))}
            if not failed:
                break
            if attempt == ATTEMPTS:
                k, problem = next(iter(failed.items()))
                text = json.dumps(choices[k]["message"].get("content") or "")[:300]
                raise RequestError(
                    f"the policy's reply {problem} in {ATTEMPTS} attempts (the last: {text}); "
                    + (
                        'send tool_choice "auto" to get its reply as it is'
                        if request.forced is not None
                        else "send no response_format to get its reply as text"
                    ),
                    "tool_choice" if request.forced is not None else "response_format",
                    status=422,
                    code="invalid_model_output",
                )
            again = {k: self._row(prepared, k, attempt=attempt) for k in failed}
            self.batcher.submit(list(again.values())).result()
            for k, row in again.items():
                rows[k], choices[k] = row, self._reply(prepared, k, row)
        completion_tokens = sum(len(row.tokens) for row in rows)
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

    def _reply(self, prepared: Prepared, index: int, row) -> dict:
        text = prepared.prefix + self.decode(row.tokens)
        return self._choice(index, text, row.ended, prepared.request, prepared.parser)

    @staticmethod
    def _problem(choice: dict, request: Request) -> str:
        """Why a choice does not do what the request's tool_choice or response_format asks ("" if it does)."""
        message, reason = choice["message"], choice["finish_reason"]
        ended = " (it ended at max_tokens)" if reason == "length" else ""
        if request.forced is not None:
            names = [call["function"]["name"] for call in message.get("tool_calls") or []]
            wanted = request.forced or "a declared tool"
            if not names or (request.forced and any(name != request.forced for name in names)):
                return f"was not a valid call of {wanted}{ended}"
            return ""
        if not request.json or reason == "length":  # cut short, as OpenAI returns it: finish_reason says so
            return ""
        try:
            value = json_input.loads(message.get("content") or "")
        except json_input.JsonInputError as exc:
            return f"was not JSON ({exc})"
        if not isinstance(value, dict):
            return "was not a JSON object"
        if request.schema and (error := next(jsonschema.Draft202012Validator(request.schema).iter_errors(value), None)):
            return f"did not meet the schema ({error.message[:200]})"
        return ""

    def _generate(self, rows: list) -> None:

        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.chat.stop_ids[0]
        batcher = self.batcher
        generate_rows(self.model, rows, stop_ids=self.chat.stop_ids, pad_id=pad, admit=batcher.admit, left=batcher.left)

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


SENTINEL = "\u2063"


def forced_prefix(parser, tools: list[Tool], name: str) -> str:
    """The text a call of tool `name` starts with in the parser's format, up to its arguments
    (`<tool_call>\n{"name": "search", "arguments":`, `search[`): the server writes it and the
    policy goes on from there. With "" (any tool), what the calls of every declared tool share,
    up to its last space (`<tool_call>\n{"name":`), so the policy still chooses the tool."""
    starts = []
    for tool in tools if not name else [t for t in tools if t.name == name]:
        arguments = {"x": SENTINEL}
        text = parser.format([ToolCall(tool.name, arguments)])
        cuts = [i for i in (text.find(json.dumps(arguments)), text.find(SENTINEL)) if i >= 0]
        starts.append(text[: min(cuts)].rstrip() if cuts else "")
    if name or len(starts) == 1:
        return starts[0]
    shared = os.path.commonprefix(starts)
    return shared[: max(shared.rfind(" "), shared.rfind("\n"), 0)].rstrip()


def chunk(base: dict, index: int, delta: dict, reason: str | None = None) -> dict:
    """One chat.completion.chunk of choice `index`."""
    return {**base, "choices": [{"index": index, "delta": delta, "finish_reason": reason, "logprobs": None}]}


def stream_chunks(
    completion: dict, include_usage: bool, *, sent: list[str] | None = None, calls: list[list] | None = None
) -> list[dict]:
    """A finished completion as the chunks of a stream (role, content, tool calls, the end).
    With `sent` and `calls` (each choice's content and `StreamedCall`s already streamed, after its
    role chunk), only the rest. Raises RequestError where a call was streamed that the finished
    reply does not make (the policy began a call it did not finish as a valid one): what was sent
    cannot be taken back, and the stream must not end as a message other than the reply."""
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
        for call in _calls_after(message, calls[index] if calls is not None else []):
            chunks.append(chunk(base, index, {"tool_calls": [call]}))
        chunks.append(chunk(base, index, {}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks


def _calls_after(message: dict, streamed: list[StreamedCall]) -> list[dict]:
    """The tool-call deltas of a reply not yet streamed: the rest of each streamed call's arguments,
    then the calls not begun, whole."""
    final = message.get("tool_calls") or []
    for k, call in enumerate(streamed):
        function = final[k]["function"] if k < len(final) else None
        if function is None or function["name"] != call.name or not function["arguments"].startswith(call.arguments):
            text = json.dumps(message.get("content") or "")[:300]
            raise RequestError(
                f"the policy began a call of {call.name} but did not write a valid call of a declared tool "
                f"(its reply: {text}); send stream: false to get the reply as text",
                "stream",
                status=422,
                code="invalid_model_output",
            )
    deltas = [
        {"index": k, "function": {"arguments": rest}}
        for k, call in enumerate(streamed)
        if (rest := final[k]["function"]["arguments"][len(call.arguments) :])
    ]
    return deltas + [{"index": k, **call} for k, call in enumerate(final) if k >= len(streamed)]
