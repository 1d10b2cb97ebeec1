"""Tool-call parsers: a chat model's generated text -> its message (content and tool calls).

Each model family writes tool calls its own way; the parser of a policy reads them back and,
for behaviour cloning, writes them the same way (`format`):

    hermes       Qwen2/2.5/3, Hermes and most open chat templates:
                 <tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>
    smollm2      SmolLM2's tool prompt: the turn's calls as one JSON list in one block:
                 <tool_call>[{"name": "search", "arguments": {"query": "x"}}]</tool_call>
    llama3_json  Llama 3.1/3.2/3.3: the whole turn is one JSON object (optionally after
                 <|python_tag|>): {"name": "search", "parameters": {"query": "x"}}
    compact      Arbiter's default policy: search[ x]. One text argument per tool, short
                 enough for a 1M-parameter model to learn (training/policy/layout.py).
    transformers the tokenizer's own `response_template` (transformers' `parse_response`),
                 chosen whenever the model directory declares one.

A parse never raises on what the model wrote: text it cannot read becomes a `ParsedTurn`
with a `problem`, which the rollout turns into an error observation that uses a step.
How to add a parser: docs/policies.md.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from core import json_input
from training.envs.compact import NotACall, compact_call


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Any  # a dict when well formed; anything else is refused by the episode runner


@dataclass(frozen=True)
class ParsedTurn:
    """One assistant turn read back: free text, the tool calls in order, or why it could not be read."""

    content: str = ""
    calls: tuple[ToolCall, ...] = ()
    problem: str = ""


@dataclass
class ToolCallParser(ABC):
    """Base class: `parse` the text of one turn (without the end-of-turn token), `format` calls as the model writes them."""

    name: str = ""
    tools: list = field(default_factory=list)  # training.envs.base.Tool, for parsers that need the schemas

    @abstractmethod
    def parse(self, text: str) -> ParsedTurn:
        """The turn read back; what cannot be read is a `problem`, never an exception."""

    @abstractmethod
    def format(self, calls: list[ToolCall], content: str = "") -> str:
        """The calls (and content) written as the model writes them."""

    def streamable(self, text: str) -> int:
        """How much of a turn's text so far is surely content, whatever comes next: what a server
        may stream before the turn is read. 0 unless the format says (a call may be forming)."""
        return 0

    def partial_calls(self, text: str) -> list[PartialCall]:
        """The calls of a turn so far whose names are written, each with how its arguments surely
        start (`PartialCall`): what a server may stream of them before the turn is read. None
        unless the format says."""
        return []


def _loads(text: str) -> tuple[Any, str]:
    """(value, problem): JSON from a model's text through the one strict reader (core.json_input:
    no NaN, Infinity or 1e400, no lone surrogate or NUL, bounded nesting); what it refuses is a
    problem, never an exception, so a served reply never carries a number clients cannot read."""
    try:
        return json_input.loads(text), ""
    except json_input.JsonInputError as exc:
        return None, str(exc)


def _call_from(obj: Any, argument_keys: tuple[str, ...]) -> tuple[ToolCall | None, str]:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None, 'a tool call is a JSON object with a "name" string.'
    arguments = next((obj[k] for k in argument_keys if k in obj), {})
    if isinstance(arguments, str):  # some models write the arguments as a JSON string, as OpenAI's API does
        decoded, problem = _loads(arguments)
        if problem:
            return None, f"the arguments of {obj['name']} are a string that is not JSON ({problem})."
        arguments = decoded
    return ToolCall(obj["name"], arguments), ""


def _json_calls(texts: list[str], argument_keys: tuple[str, ...]) -> tuple[tuple[ToolCall, ...], str]:
    """(calls, problem) from the JSON text of each call."""
    calls = []
    for text in texts:
        obj, problem = _loads(text)
        if problem:
            return (), f"the tool call is not JSON: {problem}"
        for item in obj if isinstance(obj, list) else [obj]:  # a JSON list holds several calls (SmolLM2)
            call, problem = _call_from(item, argument_keys)
            if problem:
                return (), problem
            calls.append(call)
    if not calls:
        return (), "an empty list of tool calls."
    return tuple(calls), ""


class HermesParser(ToolCallParser):
    BLOCK = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.S)

    def __init__(self, tools=None):
        super().__init__("hermes", list(tools or []))

    def parse(self, text: str) -> ParsedTurn:
        if "<tool_call>" not in text:
            return ParsedTurn(content=_without_thinking(text))
        blocks = list(self.BLOCK.finditer(text))
        if not all(match.group(2) for match in blocks):
            return ParsedTurn(content=text, problem="a <tool_call> without its </tool_call>.")
        calls, problem = _json_calls([match.group(1).strip() for match in blocks], ("arguments", "parameters"))
        if problem:
            return ParsedTurn(content=text, problem=problem)
        return ParsedTurn(content=_without_thinking(self.BLOCK.sub("", text)), calls=calls)

    def format(self, calls, content=""):
        blocks = [f"<tool_call>\n{json.dumps({'name': c.name, 'arguments': c.arguments})}\n</tool_call>" for c in calls]
        return "\n".join(([content] if content else []) + blocks)

    def streamable(self, text: str) -> int:
        if "<think>" in text:  # thinking is left out of the content once the turn is read
            return 0
        if (start := text.find("<tool_call>")) >= 0:
            return start
        return len(text) - partial_suffix(text, "<tool_call>")

    def partial_calls(self, text: str) -> list[PartialCall]:
        calls = []
        for match in self.BLOCK.finditer(text):
            body = match.group(1)
            if not match.group(2):  # the block still open: its closing tag may be half written
                body = body[: len(body) - partial_suffix(body, "</tool_call>")]
            calls += _partial_json_calls(body, ("arguments", "parameters"))
        return calls


class SmolLM2Parser(HermesParser):
    """SmolLM2's published format: every call of a turn in one block, as a JSON list. It reads
    Hermes' one-object blocks too."""

    def __init__(self, tools=None):
        super().__init__(tools)
        self.name = "smollm2"

    def format(self, calls, content=""):
        block = json.dumps([{"name": c.name, "arguments": c.arguments} for c in calls])
        return "\n".join(([content] if content else []) + [f"<tool_call>{block}</tool_call>"])


class Llama3JsonParser(ToolCallParser):
    def __init__(self, tools=None):
        super().__init__("llama3_json", list(tools or []))

    def parse(self, text: str) -> ParsedTurn:
        body = text.strip()
        tagged = body.startswith("<|python_tag|>")
        body = body.removeprefix("<|python_tag|>").strip()
        if not (tagged or body.startswith("{")):
            return ParsedTurn(content=text.strip())
        calls, problem = _json_calls(_split_top_level(body), ("parameters", "arguments"))
        return ParsedTurn(content=text, problem=problem) if problem else ParsedTurn(calls=calls)

    def format(self, calls, content=""):
        return "; ".join(json.dumps({"name": c.name, "parameters": c.arguments}) for c in calls)

    def streamable(self, text: str) -> int:
        body = text.strip()
        if not body or body.startswith(("{", "<|python_tag|>")) or "<|python_tag|>".startswith(body):
            return 0
        return len(text)

    def partial_calls(self, text: str) -> list[PartialCall]:
        body = text.strip()
        tagged = body.startswith("<|python_tag|>")
        body = body.removeprefix("<|python_tag|>").strip()
        if not (tagged or body.startswith("{")):
            return []
        calls = []
        for part in _split_top_level(body):
            found = _partial_json_calls(part, ("parameters", "arguments"))
            if not found:
                break
            calls += found
        return calls


def _split_top_level(body: str) -> list[str]:
    """`{...}; {...}` -> the objects (Llama 3 separates parallel calls with semicolons)."""
    parts, depth, start, in_string, escaped = [], 0, 0, False, False
    for i, ch in enumerate(body):
        if in_string:  # a quote ends the string unless escaped (`\"` does not; `\\"` does)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == ";" and depth == 0:
            parts.append(body[start:i].strip())
            start = i + 1
    parts.append(body[start:].strip())
    return [p for p in parts if p]


class CompactParser(ToolCallParser):
    """`tool[ argument]`: the tool's one argument (its first property) given as text; an
    integer or number argument is converted by its schema."""

    def __init__(self, tools=None):
        super().__init__("compact", list(tools or []))

    def parse(self, text: str) -> ParsedTurn:
        try:
            name, arguments = compact_call(text, self.tools)
        except NotACall as exc:
            return ParsedTurn(content=text, problem=str(exc))
        return ParsedTurn(calls=(ToolCall(name, arguments),))

    def format(self, calls, content=""):
        (call,) = calls
        value = next(iter(call.arguments.values()), "") if call.arguments else ""
        return f"{call.name}[ {value}]" if isinstance(value, str) else f"{call.name}[{value}]"

    # Text that may still become `tool[argument]`: a name so far, or a name and an open bracket.
    MAY_CALL = re.compile(r"\s*([A-Za-z_][\w-]*)?(\[.*)?", re.S)

    def streamable(self, text: str) -> int:
        return 0 if self.MAY_CALL.fullmatch(text) else len(text)

    CALL_START = re.compile(r"\s*([A-Za-z_][\w-]*)\[(.*)", re.S)

    def partial_calls(self, text: str) -> list[PartialCall]:
        """`tool[` names the call. Its argument goes on to the last `]` of the finished turn: so far,
        up to the last `]` written, or all of it if none is; stripped as `compact_call` strips it
        (trailing spaces may be stripped, or not, so they wait). A number waits until it is whole."""
        if not (match := self.CALL_START.fullmatch(text)):
            return []
        name, raw = match.groups()
        tool = next((t for t in self.tools if t.name == name), None)
        properties = tool.parameters.get("properties", {}) if tool is not None else {}
        if not properties:
            return [PartialCall(name)]
        key, schema = next(iter(properties.items()))
        if schema.get("type") in ("integer", "number"):
            return [PartialCall(name)]
        sure = raw[: raw.rfind("]")] if "]" in raw else raw
        return [PartialCall(name, json.dumps({key: sure.strip()})[:-2])]


class TransformersParser(ToolCallParser):
    """The tokenizer's own `response_template`, through transformers' `parse_response`."""

    def __init__(self, tokenizer, tools=None):
        super().__init__("transformers", list(tools or []))
        self.tokenizer = tokenizer

    def parse(self, text: str, prefix: str = "") -> ParsedTurn:
        try:
            message = self.tokenizer.parse_response(
                text, prefix=prefix, tools=[t.as_openai() for t in self.tools] or None
            )
        except Exception as exc:  # noqa: BLE001 - whatever the template's parser raises is the model's mistake
            return ParsedTurn(content=text, problem=f"the response could not be parsed: {exc}")
        calls = []
        for raw in message.get("tool_calls") or []:
            function = raw.get("function", raw) if isinstance(raw, dict) else {}
            call, problem = _call_from(function, ("arguments", "parameters"))
            if problem:
                return ParsedTurn(content=text, problem=problem)
            calls.append(call)
        content = message.get("content") or ""
        return ParsedTurn(content=content if isinstance(content, str) else str(content), calls=tuple(calls))

    def format(self, calls, content=""):
        return HermesParser().format(calls, content)


def partial_suffix(text: str, marker: str) -> int:
    """The length of the longest end of `text` that is the start of `marker` (it may become it)."""
    return next((n for n in range(min(len(marker) - 1, len(text)), 0, -1) if marker.startswith(text[-n:])), 0)


def _without_thinking(text: str) -> str:
    return re.sub(r"<think>.*?</think>", "", text, flags=re.S).strip()


# A call streamed as it is written -----------------------------------------------------------

MARK = "\u2063"  # where partial JSON was cut, put in by `close_partial_json`
# What closes partial JSON cut in each state, and how many characters before MARK in the dumped
# value are a placeholder's (its opening quote), not the model's.
_TAILS = {
    "string": (MARK + '"', 0),
    "key-string": (MARK + '": 0', 0),
    "key": (f'"{MARK}": 0', 1),
    "colon": (f': "{MARK}"', 1),
    "value": (f'"{MARK}"', 1),
}


@dataclass(frozen=True)
class PartialCall:
    """A tool call being written: its name, once written whole, and how `json.dumps` of its
    arguments will surely start when the call is finished, whatever comes next."""

    name: str
    arguments: str = ""


def close_partial_json(text: str) -> tuple[str, int] | None:
    """Partial JSON made whole, with MARK where it was cut (or `text` itself when it is whole):
    (the text, how many characters before MARK in its dumped value are a placeholder's: `_TAILS`,
    3 for `, "` after a value that may be the last). A number or literal that may go on, or an
    escape sequence not yet whole, is left out. None before a value starts or if it is not JSON."""
    stack: list[str] = []  # the open brackets
    state, i = "value", 0  # what comes next: value, key, colon or after (a value)
    while i < len(text):
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
        elif ch == '"' and state in ("key", "value"):
            end, closed = _string_end(text, i + 1)
            if not closed:
                return _closed(text[:end], stack, "key-string" if state == "key" else "string")
            i, state = end, ("colon" if state == "key" else "after")
        elif ch in "{[" and state == "value":
            stack.append(ch)
            i, state = i + 1, ("key" if ch == "{" else "value")
        elif ch in "}]" and stack and state != "colon":
            stack.pop()
            i, state = i + 1, "after"
        elif (ch == ":" and state == "colon") or (ch == "," and state == "after" and stack):
            i, state = i + 1, ("value" if ch == ":" or stack[-1] == "[" else "key")
        elif state == "value":  # a number or a literal: whole once something follows it
            end = i
            while end < len(text) and text[end] not in ' \t\r\n,]}:"':
                end += 1
            if end == len(text):
                return _closed(text[:i], stack, state) if stack else None
            i, state = end, "after"
        else:
            return None
    if not stack:
        return (text, 0) if state == "after" else None
    return _closed(text, stack, state)


def _closed(text: str, stack: list[str], state: str) -> tuple[str, int]:
    if state == "after":
        tail, back = (f', "{MARK}": 0' if stack[-1] == "{" else f', "{MARK}"'), 3
    else:
        tail, back = _TAILS[state]
    return text + tail + "".join("}" if c == "{" else "]" for c in reversed(stack)), back


def _string_end(text: str, start: int) -> tuple[int, bool]:
    """(the index after the closing quote, True) of the string whose characters start at `start`;
    (where its whole characters end, False) if it is not closed yet: an escape sequence, or the
    first half of a surrogate pair, whose rest has not come is not whole."""
    i = start
    while i < len(text):
        if text[i] == "\\":
            size = 6 if text[i + 1 : i + 2] == "u" else 2
            if size == 6 and text[i + 2 : i + 4].lower() in ("d8", "d9", "da", "db"):  # a surrogate pair: both halves
                size = 12
            if i + size > len(text):
                return i, False
            i += size
        elif text[i] == '"':
            return i + 1, True
        else:
            i += 1
    return i, False


def _partial_json_calls(body: str, argument_keys: tuple[str, ...]) -> list[PartialCall]:
    """The calls of partial JSON (a call object or a list of them) whose names are written whole."""
    if MARK in body or (closed := close_partial_json(body)) is None:
        return []
    text, back = closed
    value, problem = _loads(text)
    if problem:
        return []
    calls = []
    for item in value if isinstance(value, list) else [value]:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or MARK in name:
            break
        key = next((k for k in argument_keys if k in item), None)
        sure = ""
        if key is not None and not isinstance(item[key], str):  # arguments as a JSON string: sent once whole
            dumped = json.dumps(item[key], allow_nan=False)
            cut = dumped.find("\\u2063")
            sure = dumped if cut < 0 else dumped[: cut - back]
        calls.append(PartialCall(name, sure))
    return calls


PARSERS = {
    "hermes": HermesParser,
    "smollm2": SmolLM2Parser,
    "llama3_json": Llama3JsonParser,
    "compact": CompactParser,
}


def detect_parser(chat_template: str | None, *, response_template=None) -> str:
    """The parser a chat template's tool calls need, by what the template writes."""
    template = chat_template or ""
    if response_template:
        return "transformers"
    if '<tool_call>[{"name"' in template:  # the calls as one JSON list (SmolLM2's tool prompt)
        return "smollm2"
    if "<tool_call>" in template:
        return "hermes"
    if "<|python_tag|>" in template or "ipython" in template:
        return "llama3_json"
    if "<|assistant|>" in template and "<|end|>" in template:  # Arbiter's default policy (training/policy/layout.py)
        return "compact"
    return ""
