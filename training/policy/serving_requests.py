"""A chat completion request, checked: what `POST /v1/chat/completions` of the policy server
(training/policy/serving.py, serving_http.py) takes, and its refusals in OpenAI's error shape.

A field the server does not implement is refused by name, never ignored; `tool_choice`
("required" or a named tool) and `response_format` (json_object, json_schema) are read into
what the server honours (docs/serving.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema

from training.envs.base import Tool
from training.policy.conversations import ConversationError, tools_of

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
    "response_format",
}
# The Responses API (the OpenAI Agents SDK's default) is not served: its clients are told how to switch.
RESPONSES_REFUSAL = (
    "this server implements the Chat Completions API (POST /v1/chat/completions), not the Responses API; "
    "in the OpenAI Agents SDK use OpenAIChatCompletionsModel or set_default_openai_api('chat_completions') "
    "(docs/serving.md)"
)
NEUTRAL = {"frequency_penalty": 0, "presence_penalty": 0, "logprobs": False}


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
    forced: str | None = None  # tool_choice "required" (""), or the name of the tool to call
    json: bool = False  # response_format json_object or json_schema: the reply is one JSON object
    schema: dict | None = None  # json_schema's schema, checked on the reply


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
    forced = _tool_choice(body.get("tool_choice"), tools)
    if forced == "none":
        tools, forced = [], None
    json_mode, schema = _response_format(body.get("response_format"))
    if json_mode and forced is not None:
        raise RequestError(
            "response_format: with tool_choice forcing a call the reply is that call, not JSON text; "
            "send one of the two (tool_choice 'auto' to let the policy choose)",
            "response_format",
        )
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
        forced=forced,
        json=json_mode,
        schema=schema,
    )


def _tool_choice(choice: Any, tools: list[Tool]) -> str | None:
    """None ("auto": the policy chooses), "none", "" (a call of some tool), or the tool's name."""
    if choice in (None, "auto"):
        return None
    if choice == "none":
        return "none"
    named = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    if choice not in ("required", "any") and not (isinstance(named, dict) and isinstance(named.get("name"), str)):
        raise RequestError(
            'tool_choice: "auto", "none", "required", or {"type": "function", "function": {"name": ...}}',
            "tool_choice",
        )
    if not tools:
        raise RequestError("tool_choice: a call is forced but the request declares no tools", "tool_choice")
    name = named["name"] if named else ""
    if name and name not in {tool.name for tool in tools}:
        raise RequestError(f"tool_choice: {name[:100]!r} is not one of the request's tools", "tool_choice")
    return name


def _response_format(value: Any) -> tuple[bool, dict | None]:
    """(the reply must be a JSON object, the JSON Schema it must meet) from `response_format`."""
    if value is None:
        return False, None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return False, None
    if kind == "json_object":
        return True, None
    spec = value.get("json_schema") if kind == "json_schema" else None
    if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
        raise RequestError(
            'response_format: {"type": "text"}, {"type": "json_object"} or '
            '{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}',
            "response_format",
        )
    schema = spec.get("schema") or {}
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise RequestError(
            f"response_format: the schema is not a JSON Schema: {exc.message}", "response_format"
        ) from None
    if schema.get("type", "object") != "object":
        raise RequestError(
            "response_format: this server writes a JSON object; the schema's type: object", "response_format"
        )
    return True, schema
