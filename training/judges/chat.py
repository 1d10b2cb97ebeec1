"""A client for chat models that answer in JSON, behind any OpenAI-compatible endpoint (vLLM,
SGLang, Ollama, llama.cpp's server, a hosted API): the transport of the judges.

Plain Python and httpx2 (the HTTP client the `openai` SDK uses), no Django. One request is
`POST {base_url}/chat/completions` with the model, the messages, the temperature, max_tokens
and, by `structured_output`, a `response_format`: "json_schema" (strict, the schema given to
the client), "json_object", or "prompt" (none: the schema is in the messages, as
`training.judges.prompt.judge_messages` puts it). The answer is `choices[0].message.content`
as a JSON object (a ``` or ```json fence around it is taken off) that is valid against the
schema.

`ChatJudgeClient.ask(messages)` asks once, retrying what may go better a second time:
connection errors, timeouts (`timeout_s` for the whole request), HTTP 408, 409,
429 and 5xx, and invalid answers (not a JSON object, not valid against the schema, no text
content), up to `max_retries` times, after a wait of `Retry-After` where the server sends
one, else a full-jitter exponential backoff (uniform in 0..backoff_s * 2**retry), at most
60 s. Other 4xx are final, except a 400 that names response_format, json_schema or
structured output while the client asks for structured output: the server cannot do it, so
the client asks in "prompt" mode from then on, for every later request too, and at once.

Every HTTP attempt leaves a `CallRecord` (the body sent, the raw reply, status, tokens, cost)
for the audit log; the API key is sent only in the Authorization header and is cut out of
any reply text or error that would hold it.

Connections are kept alive and reused (one pool per client, `concurrency` connections); each
new connection goes to an address vetted when it is made (training/judges/addresses.py), and
the judge's host name is vetted again before every request. The proxies of the environment
(HTTPS_PROXY, HTTP_PROXY, NO_PROXY) are used; through a proxy the proxy resolves the name, so
the name is vetted but the address cannot be pinned. `close()` closes the pool.

A client gives up on its endpoint, for every item at once, when asking again cannot go
better: at the first 401, 403 or 404 (a wrong key, or a model or route the server does not
have) or address it may not call, and after `max_failures_in_a_row` calls in a row got no
reply from the model (connection refused, a name that does not resolve, timeouts, other HTTP
errors; a 429 or a reply with Retry-After is the server asking to wait and counts for nothing,
and any 2xx reply, even an answer that is not valid, ends the streak). `stop_reason` then says
why in one line ("the endpoint http://127.0.0.1:9/v1 refused the connection on 5 calls in a
row"); a dead endpoint costs seconds, not every item's retries.

`ChatJudgeClient.ask_many(items, on_answer=...)` asks many items `concurrency` at a time in
threads, hands each `ChatAnswer` to `on_answer` in the caller's thread (where it may write to
a database), and stops handing out items when `should_stop()` says so, the cost cap is
reached or the client has given up on its endpoint. Requests of all threads start at least
60/requests_per_minute seconds apart. The cost of a request (usage tokens times the settings' prices) is known only once it is
answered, so the cap, checked before every request, can be passed by the requests already in
flight: at most `concurrency` of them.
"""

from __future__ import annotations

import json
import math
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx2
import jsonschema
import jsonschema.exceptions

from core import json_input
from training.judges.addresses import AddressRefused, endpoint, vetted_addresses
from training.judges.pinned_http import pinned_client

MODES = ("json_schema", "json_object", "prompt")
SCHEMA_NAME = "verdict"  # response_format.json_schema.name
RETRY_STATUSES = (408, 409, 429)  # and every 5xx
GIVE_UP_STATUSES = (401, 403, 404)  # the key, the permission, the model or route: the same for every item
MAX_DELAY_S = 60.0  # the longest wait before a retry, whatever Retry-After says
REPLY_MAX_BYTES = 8 * 2**20  # a reply is read up to this; a longer one is refused
RECORD_TEXT_MAX = 100_000  # the raw reply kept in a CallRecord
ERROR_TEXT_MAX = 300
CONCURRENCY_MAX = 256
POLL_S = 1.0  # how often ask_many asks should_stop() while waiting for answers
# Words in a 400's error text saying the server cannot do the response_format asked for.
_STRUCTURED_WORDS = ("response_format", "json_schema", "json_object", "structured output", "structured_output")
_FENCED = re.compile(r"```[A-Za-z]*\s*(.*?)\s*```", re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")
_END = object()  # the end of ask_many's items


@dataclass(frozen=True)
class ChatJudgeSettings:
    """Where the judge model is and how to ask it. `problems()` lists what is wrong."""

    base_url: str = field(metadata={"help": "The endpoint's /v1 address, e.g. http://127.0.0.1:8000/v1."})
    model: str = field(metadata={"help": "The model name the server knows."})
    api_key: str = field(
        default="", repr=False, metadata={"help": "Sent as Authorization: Bearer; empty for none. Never recorded."}
    )
    temperature: float = field(default=0.0, metadata={"help": "Sampling temperature, 0 to 2."})
    timeout_s: float = field(
        default=60.0, metadata={"help": "Seconds a request may take in all, from connecting to the reply's last byte."}
    )
    concurrency: int = field(default=4, metadata={"help": "Requests in flight at once in ask_many."})
    requests_per_minute: float = field(
        default=60.0, metadata={"help": "Requests started per minute, all threads together; 0 for no limit."}
    )
    max_retries: int = field(default=4, metadata={"help": "Retries of one item after its first attempt."})
    backoff_s: float = field(default=1.0, metadata={"help": "Backoff base: retry r waits up to backoff_s * 2**r."})
    max_tokens: int = field(default=1024, metadata={"help": "The longest answer, in tokens."})
    structured_output: Literal["json_schema", "json_object", "prompt"] = field(
        default="json_schema",
        metadata={"help": "response_format sent: a strict json_schema, json_object, or none (prompt)."},
    )
    price_input_per_mtok: float = field(default=0.0, metadata={"help": "USD per million prompt tokens."})
    price_output_per_mtok: float = field(default=0.0, metadata={"help": "USD per million completion tokens."})
    max_cost_usd: float | None = field(
        default=None, metadata={"help": "Stop asking once this much is spent (None: no cap)."}
    )
    max_failures_in_a_row: int = field(
        default=5,
        metadata={
            "help": "Give up on the endpoint after this many calls in a row got no reply from the model (connection "
            "refused, timeouts, HTTP errors but 429); 0: never. A 401, 403 or 404 gives up at once."
        },
    )

    def problems(self) -> list[str]:
        """What is wrong with the settings, one message per field, naming it; [] when all is well."""
        problems = []
        url_problem = _url_problem(self.base_url)
        if url_problem:
            problems.append(f"base_url: {url_problem}")
        if not isinstance(self.model, str) or not self.model.strip():
            problems.append("model: the model's name, as the server knows it")
        if not isinstance(self.api_key, str) or any(ord(ch) < 32 or ord(ch) == 127 for ch in self.api_key):
            problems.append("api_key: one line of text without control characters (or empty for none)")
        numbers = [
            ("temperature", self.temperature, 0, 2, False, "a number from 0 to 2"),
            ("timeout_s", self.timeout_s, 0, 3600, True, "seconds, above 0 and at most 3600"),
            ("requests_per_minute", self.requests_per_minute, 0, None, False, "a number from 0 (0: no limit)"),
            ("backoff_s", self.backoff_s, 0, MAX_DELAY_S, False, f"seconds from 0 to {MAX_DELAY_S:g}"),
            ("price_input_per_mtok", self.price_input_per_mtok, 0, None, False, "USD from 0"),
            ("price_output_per_mtok", self.price_output_per_mtok, 0, None, False, "USD from 0"),
        ]
        if self.max_cost_usd is not None:
            numbers.append(("max_cost_usd", self.max_cost_usd, 0, None, False, "USD from 0, or None for no cap"))
        for name, value, low, high, above, wanted in numbers:
            if not _is_number(value) or value < low or (above and value == low) or (high is not None and value > high):
                problems.append(f"{name}: {wanted}, not {_shown(value)}")
        wholes = [
            ("concurrency", self.concurrency, 1, CONCURRENCY_MAX),
            ("max_retries", self.max_retries, 0, 20),
            ("max_tokens", self.max_tokens, 1, 1_000_000),
            ("max_failures_in_a_row", self.max_failures_in_a_row, 0, 1000),
        ]
        for name, value, low, high in wholes:
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                problems.append(f"{name}: a whole number from {low} to {high}, not {_shown(value)}")
        if self.structured_output not in MODES:
            problems.append(f"structured_output: one of {', '.join(MODES)}, not {_shown(self.structured_output)}")
        return problems


@dataclass
class CallRecord:
    """One HTTP attempt, for the audit log."""

    request: dict  # the JSON body sent (the key travels only in a header)
    attempt: int  # 1-based, within one item
    structured_output: str  # the mode of this attempt
    status: Literal["ok", "invalid", "error"] = "error"  # invalid: answered, but no valid JSON answer
    http_status: int | None = None  # None: no reply (connection error, timeout)
    response_text: str = ""  # the raw reply, up to RECORD_TEXT_MAX characters
    error: str = ""  # why not ok
    latency_s: float = 0.0
    prompt_tokens: int | None = None  # from the reply's usage; None when it sent none
    completion_tokens: int | None = None
    cost_usd: float = 0.0


@dataclass
class ChatAnswer:
    """What came of one item: the answer, or None and why not, with every attempt's record."""

    key: Hashable  # the caller's key for the item
    answer: dict | None
    calls: list[CallRecord] = field(default_factory=list)
    error: str = ""  # why there is no answer
    # Given up short for the cap, should_stop, or the client giving up on its endpoint (no answer).
    stopped: Literal["cost_cap", "stopped", "failing"] | None = None


@dataclass
class _Attempt:
    record: CallRecord
    answer: dict | None = None
    retry: bool = False  # worth asking again
    retry_after: float | None = None  # seconds the server asked to wait
    fallback: bool = False  # the server refused structured output: ask again at once in prompt mode
    failure: str = ""  # no reply from the model, in words for stop_reason ("refused the connection")
    give_up: bool = False  # no item can go better: the client gives up on the endpoint at once


class ChatJudgeClient:
    """Asks a chat model for JSON answers valid against `schema` (see the module's docstring).

    `spent_usd` is what earlier runs spent, counted against `max_cost_usd`. `sleep`, `clock`
    and `rng` are injected so that tests need not wait and jitter can be reproduced; without
    `sleep`, a wait before a retry in `ask_many` ends early when the client stops.
    """

    def __init__(
        self,
        settings: ChatJudgeSettings,
        *,
        schema: dict,
        spent_usd: float = 0.0,
        allow_private: bool = True,
        sleep: Callable[[float], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ):
        problems = settings.problems()
        if problems:
            raise ValueError("chat judge settings: " + "; ".join(problems))
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.exceptions.SchemaError as exc:
            raise ValueError(f"schema: not a valid JSON Schema: {exc.message}") from None
        self.settings = settings
        self.schema = schema
        self._validator = jsonschema.Draft202012Validator(schema)
        self._sleep, self._clock = sleep, clock
        self._allow_private = allow_private  # private and loopback endpoints (a deployment setting)
        self._rng = rng or random.Random()
        self._lock = threading.Lock()  # guards the mode, the money, the rate slots and the rng
        self._mode = settings.structured_output
        self._spent = float(spent_usd)
        self._next_start = -math.inf  # the clock time from which the next request may start
        self._failures: list[str] = []  # the current streak of calls without a reply from the model, in words
        self._stop_reason = ""  # why the client gave up on its endpoint ("" while it has not)
        url = urlsplit(settings.base_url)
        scheme, self._host, self._port = endpoint(settings.base_url)
        self._url = f"{scheme}://{url.netloc}{url.path.rstrip('/')}/chat/completions" + (
            f"?{url.query}" if url.query else ""
        )
        self._http = None  # the connection pool, made at the first request

    def close(self) -> None:
        """Close the kept-alive connections."""
        with self._lock:
            http, self._http = self._http, None
        if http is not None:
            http.close()

    def __enter__(self) -> ChatJudgeClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def mode(self) -> str:
        """The structured output mode asked for now (it may have fallen back to "prompt")."""
        with self._lock:
            return self._mode

    @property
    def stop_reason(self) -> str:
        """Why the client gave up on its endpoint, in one line; "" while it has not."""
        with self._lock:
            return self._stop_reason

    @property
    def spent_usd(self) -> float:
        """The money spent so far, including the constructor's `spent_usd`."""
        with self._lock:
            return self._spent

    def ask(self, messages: list[dict], *, key: Hashable = None) -> ChatAnswer:
        """One item's answer, with retries (see the module's docstring)."""
        return self._ask(key, messages, None)

    def ask_many(
        self,
        items: Iterable[tuple[Hashable, list[dict]]],
        *,
        on_answer: Callable[[ChatAnswer], None],
        should_stop: Callable[[], bool] = lambda: False,
    ) -> dict:
        """Ask every (key, messages) item, `concurrency` at a time, and hand each answer to
        `on_answer` in this (the caller's) thread, in the order they finish.

        Items are taken from `items` as threads free up, never more than 2 * concurrency
        ahead of the answers delivered. No item is handed out once `should_stop()` (asked
        here, in the caller's thread, before each hand-out and every second while waiting)
        is true, `spent_usd` reaches `max_cost_usd` or the client gives up on its endpoint
        (`stop_reason`); items already handed out are finished and delivered, but ask nothing
        more after that (their ChatAnswer says `stopped`, and has no calls if none had started).
        The cap is checked before every request, so the requests in flight when it is reached,
        at most `concurrency`, can spend past it.
        If `on_answer` raises, the items in flight are finished without being delivered and
        the exception is raised here.

        Returns {"asked", "answered", "failed", "stopped", "spent_usd"}: asked = items handed
        out = answered + failed (those stopped short count as failed); stopped is None,
        "cost_cap", "stopped" or "failing" (an item was left unasked or cut short, and why).
        """
        concurrency = self.settings.concurrency
        counts = {"asked": 0, "answered": 0, "failed": 0}
        stopped = None
        halt = threading.Event()  # should_stop() said so: threads ask nothing more
        source = iter(items)
        exhausted = False
        pending: set = set()
        executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="chat-judge")
        try:
            while not (exhausted and not pending):
                if stopped is None and should_stop():
                    stopped = "stopped"
                    halt.set()
                while stopped is None and not exhausted and len(pending) < 2 * concurrency:
                    item = next(source, _END)
                    if item is _END:
                        exhausted = True
                    elif self.stop_reason:
                        stopped = "failing"  # this item is dropped, unasked
                    elif self._cap_reached():
                        stopped = "cost_cap"  # this item is dropped, unasked
                    else:
                        key, messages = item
                        pending.add(executor.submit(self._ask, key, messages, halt))
                        counts["asked"] += 1
                if not pending:
                    break
                done, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
                for future in done:
                    answer = future.result()
                    counts["answered" if answer.answer is not None else "failed"] += 1
                    stopped = stopped or answer.stopped or ("failing" if self.stop_reason else None)
                    on_answer(answer)
        finally:
            halt.set()
            executor.shutdown(wait=True, cancel_futures=True)
        return {**counts, "stopped": stopped, "spent_usd": self.spent_usd}

    # One item -------------------------------------------------------------------------

    def _ask(self, key: Hashable, messages: list[dict], halt: threading.Event | None) -> ChatAnswer:
        calls: list[CallRecord] = []
        retries = 0
        while True:
            stopped = self._stopped(key, calls, halt)
            if stopped is None:
                self._wait_turn(halt)
                stopped = self._stopped(key, calls, halt)  # what happened while it waited for its turn
            if stopped is not None:
                return stopped
            step = self._attempt(messages, attempt=len(calls) + 1)
            calls.append(step.record)
            if self._count_failure(step) and halt is not None:
                halt.set()  # the other threads ask nothing more, and stop waiting to retry
            if step.answer is not None:
                return ChatAnswer(key, step.answer, calls)
            if step.fallback:
                continue
            if not step.retry:
                return ChatAnswer(key, None, calls, error=f"{step.record.error} (not retried)")
            if retries >= self.settings.max_retries:
                return ChatAnswer(
                    key, None, calls, error=f"no answer after {len(calls)} attempts; the last: {step.record.error}"
                )
            self._pause(self._delay(retries, step.retry_after), halt)
            retries += 1

    def _stopped(self, key: Hashable, calls: list[CallRecord], halt: threading.Event | None) -> ChatAnswer | None:
        """The item's answer when it may not ask (again): the client gave up, a stop, the cost cap."""
        gave_up = self.stop_reason
        if gave_up:
            return ChatAnswer(key, None, calls, error=_stopped_error(gave_up, calls), stopped="failing")
        if halt is not None and halt.is_set():
            return ChatAnswer(key, None, calls, error=_stopped_error("asked to stop", calls), stopped="stopped")
        if self._cap_reached():
            cap = f"the cost cap of {self.settings.max_cost_usd:g} USD was reached ({self.spent_usd:.4f} spent)"
            return ChatAnswer(key, None, calls, error=_stopped_error(cap, calls), stopped="cost_cap")
        return None

    def _attempt(self, messages: list[dict], *, attempt: int) -> _Attempt:
        """One HTTP request and what its reply says."""
        mode = self.mode
        body = self._body(messages, mode)
        record = CallRecord(request=body, attempt=attempt, structured_output=mode)
        data = json.dumps(body).encode()
        started = self._clock()
        try:
            status, retry_after, raw = self._post(data)
        except AddressRefused as exc:  # asking again changes nothing: the settings must
            record.latency_s = self._clock() - started
            record.error = f"refused to call {exc}"
            return _Attempt(record, failure=f"is an address the judge may not call ({exc})", give_up=True)
        except (OSError, TimeoutError, httpx2.TransportError) as exc:
            record.latency_s = self._clock() - started
            record.error = self._scrub(self._connection_error(exc))
            return _Attempt(record, retry=True, failure=self._scrub(self._connection_failure(exc)))
        record.latency_s = self._clock() - started
        text = raw[:REPLY_MAX_BYTES].decode("utf-8", errors="replace").replace("\x00", "\ufffd")
        record.http_status = status
        record.response_text = self._scrub(text[:RECORD_TEXT_MAX])
        if not 200 <= status < 300:
            record.error = self._scrub(f"HTTP {status}: {_error_message(text)}")
            if status == 400 and mode != "prompt" and any(w in text.lower() for w in _STRUCTURED_WORDS):
                with self._lock:
                    self._mode = "prompt"
                record.error += " (the server refuses structured output: asking again in prompt mode, from now on)"
                return _Attempt(record, fallback=True)
            waited = _retry_after(retry_after)
            # A 429, or any status with Retry-After, is the server asking to wait: no sign of a dead endpoint.
            failure = (
                "" if status == 429 or waited is not None else f"answered HTTP {status} ({_error_message(text)[:150]})"
            )
            return _Attempt(
                record,
                retry=status in RETRY_STATUSES or status >= 500,
                retry_after=waited,
                failure=self._scrub(failure),
                give_up=status in GIVE_UP_STATUSES,
            )
        if len(raw) > REPLY_MAX_BYTES:
            record.status, record.error = "invalid", f"the reply is over {REPLY_MAX_BYTES} bytes"
            return _Attempt(record, retry=True)
        try:
            reply = json_input.loads(text)
        except (ValueError, RecursionError) as exc:
            record.status, record.error = "invalid", f"the reply is not JSON: {str(exc)[:ERROR_TEXT_MAX]}"
            return _Attempt(record, retry=True)
        self._count_usage(record, reply)
        answer, problem = self._answer(reply)
        if problem:
            record.status, record.error = "invalid", self._scrub(problem)
            return _Attempt(record, retry=True)
        record.status = "ok"
        return _Attempt(record, answer=answer)

    def _body(self, messages: list[dict], mode: str) -> dict:
        body = {
            "model": self.settings.model,
            "messages": messages,
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
        }
        if mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": self.schema},
            }
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        return body

    def _post(self, data: bytes) -> tuple[int, str | None, bytes]:
        """(HTTP status, Retry-After header, body) of one POST, the whole of it within timeout_s;
        the host name vetted first (training/judges/addresses.py)."""
        vetted_addresses(self._host, self._port, allow_private=self._allow_private)
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "arbiter-judge"}
        headers["Accept-Encoding"] = "identity"  # the size limit counts what the server sends, not a bomb's output
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        deadline = time.monotonic() + self.settings.timeout_s
        with self._pool().stream("POST", self._url, content=data, headers=headers) as response:
            body = bytearray()
            for part in response.iter_bytes():
                body += part
                if time.monotonic() > deadline:
                    raise TimeoutError("the whole request took longer than timeout_s")
                if len(body) > REPLY_MAX_BYTES:
                    break
            return response.status_code, response.headers.get("Retry-After"), bytes(body[: REPLY_MAX_BYTES + 1])

    def _pool(self):
        """The client's connection pool: kept-alive connections, each to a vetted address."""
        with self._lock:
            if self._http is None:
                self._http = pinned_client(
                    concurrency=self.settings.concurrency,
                    timeout_s=self.settings.timeout_s,
                    allow_private=self._allow_private,
                )
            return self._http

    def _answer(self, reply: Any) -> tuple[dict | None, str]:
        """(the answer, "") from a 200 reply, or (None, what is wrong with it)."""
        choices = reply.get("choices") if isinstance(reply, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices else None
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            return None, "the reply has no choices[0].message"
        content = message.get("content")
        if isinstance(content, list):  # content parts, as some servers send them
            content = "".join(p.get("text") or "" for p in content if isinstance(p, dict) and p.get("type") == "text")
        if not isinstance(content, str) or not content.strip():
            if message.get("tool_calls"):
                why = "it made tool calls instead"
            elif message.get("refusal"):
                why = f"it refused: {str(message['refusal'])[:ERROR_TEXT_MAX]}"
            else:
                why = "it is empty"
            return None, f"the reply has no text content ({why})"
        cut = " (the reply was cut at max_tokens)" if choice.get("finish_reason") == "length" else ""
        answer, problem = _json_content(content)
        if problem:
            return None, problem + cut
        if not isinstance(answer, dict):
            return None, f"the content is JSON but not an object ({type(answer).__name__}){cut}"
        try:
            error = jsonschema.exceptions.best_match(self._validator.iter_errors(answer))
        except RecursionError:
            return None, "the answer is nested too deep to check"
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "the top level"
            return None, f"the answer does not match the schema at {where}: {error.message[:ERROR_TEXT_MAX]}"
        if not _storable(answer):
            return None, "the answer holds a NUL character or a lone surrogate, which cannot be stored"
        return answer, ""

    # Shared state ---------------------------------------------------------------------

    def _count_failure(self, step: _Attempt) -> bool:
        """Count a call in the streak of calls without a reply (a reply ends it); True when this
        call makes the client give up on its endpoint (`stop_reason` set)."""
        limit = self.settings.max_failures_in_a_row
        with self._lock:
            if self._stop_reason:
                return False
            if not step.failure:
                if step.record.http_status is not None and 200 <= step.record.http_status < 300:
                    self._failures = []
                return False
            kept = self._failures[max(0, len(self._failures) - limit + 1) :] if limit else []  # the last limit
            self._failures = [*kept, step.failure]
            where = _shown_url(self.settings.base_url)
            if step.give_up:
                self._stop_reason = f"the endpoint {where} {step.failure}: asking again cannot go better"
            elif limit and len(self._failures) >= limit:
                streak = self._failures[-limit:]
                if len(set(streak)) == 1:
                    self._stop_reason = f"the endpoint {where} {streak[0]} on {limit} calls in a row"
                else:
                    self._stop_reason = (
                        f"the endpoint {where} gave no reply on {limit} calls in a row (the last {streak[-1]})"
                    )
            return bool(self._stop_reason)

    def _pause(self, seconds: float, halt: threading.Event | None) -> None:
        """Wait before a retry; in ask_many (without an injected sleep) until the client stops, at most."""
        if self._sleep is not None:
            self._sleep(seconds)
        elif halt is not None:
            halt.wait(seconds)
        else:
            time.sleep(seconds)

    def _wait_turn(self, halt: threading.Event | None = None) -> None:
        """Wait for this request's slot: starts at least 60/requests_per_minute s apart, all threads
        together (in ask_many, without an injected sleep, until a stop at most)."""
        rate = self.settings.requests_per_minute
        if not rate:
            return
        with self._lock:
            now = self._clock()
            start = max(now, self._next_start)
            self._next_start = start + 60.0 / rate
        if start > now:
            self._pause(start - now, halt)

    def _count_usage(self, record: CallRecord, reply: Any) -> None:
        usage = reply.get("usage") if isinstance(reply, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        record.prompt_tokens = _tokens(usage.get("prompt_tokens"))
        record.completion_tokens = _tokens(usage.get("completion_tokens"))
        record.cost_usd = (record.prompt_tokens or 0) * self.settings.price_input_per_mtok / 1e6 + (
            record.completion_tokens or 0
        ) * self.settings.price_output_per_mtok / 1e6
        with self._lock:
            self._spent += record.cost_usd

    def _cap_reached(self) -> bool:
        cap = self.settings.max_cost_usd
        return cap is not None and self.spent_usd >= cap

    def _delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, MAX_DELAY_S)
        with self._lock:
            return min(self._rng.uniform(0, self.settings.backoff_s * 2**retry), MAX_DELAY_S)

    def _scrub(self, text: str) -> str:
        """The text without the API key (a server may echo what it was sent)."""
        key = self.settings.api_key
        return text.replace(key, "[api_key]") if key else text

    def _connection_failure(self, exc: BaseException) -> str:
        """What a connection error says about the endpoint, for stop_reason."""
        if isinstance(exc, TimeoutError | httpx2.TimeoutException):
            return f"did not reply within timeout_s ({self.settings.timeout_s:g} s)"
        if isinstance(exc, ConnectionRefusedError) or "refused" in str(exc).lower():
            return "refused the connection"
        if isinstance(exc, socket.gaierror):
            return f"could not be reached (its name does not resolve: {str(exc)[:ERROR_TEXT_MAX]})"
        return f"could not be reached ({type(exc).__name__}: {str(exc)[:ERROR_TEXT_MAX]})"

    def _connection_error(self, exc: BaseException) -> str:
        if isinstance(exc, TimeoutError | httpx2.TimeoutException):
            return f"no reply within timeout_s ({self.settings.timeout_s:g} s)"
        if isinstance(exc, ConnectionRefusedError) or "refused" in str(exc).lower():
            return f"could not connect to {self._host}:{self._port} (connection refused)"
        if isinstance(exc, httpx2.ConnectError):
            return f"could not connect to {self._host}:{self._port} ({str(exc)[:ERROR_TEXT_MAX]})"
        return f"{type(exc).__name__}: {str(exc)[:ERROR_TEXT_MAX]}"


# Helpers ------------------------------------------------------------------------------


def _json_content(content: str) -> tuple[Any, str]:
    """The JSON in a message's content: the whole text, or the text inside a ``` fence."""
    text = content.strip()
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        text = re.sub(r"^[A-Za-z]*", "", text[3:-3], count=1).strip()  # the fence and its language tag
    try:
        return json_input.loads(text), ""
    except RecursionError:
        return None, "the content is JSON nested too deep"
    except ValueError as exc:
        fenced = _FENCED.search(content)  # prose around a fenced block
        if fenced:
            try:
                return json_input.loads(fenced.group(1)), ""
            except (ValueError, RecursionError):
                pass
        return None, f"the content is not JSON: {str(exc)[:ERROR_TEXT_MAX]}"


def _storable(value: Any) -> bool:
    """No NUL or lone surrogate in any text (a database column holds neither)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item or _SURROGATE.search(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _error_message(text: str) -> str:
    """An error reply's message: OpenAI's {"error": {"message"}}, vLLM's {"message"},
    Ollama's {"error": "..."}, or the text itself."""
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        body = None
    message = None
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        message = message or body.get("message") or body.get("detail")
    return str(message if message else text.strip() or "(no body)")[:ERROR_TEXT_MAX]


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds: a number of seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        seconds = (moment - datetime.now(timezone.utc)).total_seconds()
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def _tokens(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _stopped_error(reason: str, calls: list[CallRecord]) -> str:
    if not calls:
        return f"not asked: {reason}"
    return f"given up after {len(calls)} attempts: {reason}; the last: {calls[-1].error}"


def _shown_url(url: str) -> str:
    """The base URL as a message shows it: without its query, which may hold a key."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)  # a huge int would overflow isfinite


def _shown(value: Any) -> str:
    return repr(value)[:60]


def _url_problem(url: Any) -> str | None:
    example = "such as http://127.0.0.1:8000/v1"
    if not isinstance(url, str) or not url.strip():
        return f"the endpoint's address, {example}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return f"not a valid address ({example})"
    if parts.username is not None or parts.password is not None:
        return "no credentials in the address: give the key as api_key"  # the address is not echoed
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"an http:// or https:// address with a host, {example}, not {url[:100]!r}"
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        return f"an address without spaces or control characters, not {url[:100]!r}"
    return None
