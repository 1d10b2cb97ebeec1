"""Trajectory formats: canonical schema v1, OpenAI chat and Anthropic Messages transcripts.

Plain Python, no Django: `parse_trajectory(obj, limits, format)` turns one decoded JSON
object into a `ParsedTrajectory` in canonical form or raises `TrajectoryFormatError` with a
reason a person can act on. The canonical schema is the JSON Schema file
`annotate/schemas/trajectory.v1.schema.json`. `format` is "auto" (`detect_format` reads
the object), "canonical", "openai" or "anthropic"; the Anthropic mapping is in
docs/formats/anthropic.md and `anthropic_to_canonical`.

OpenAI chat mapping (a line with `messages` and no `schema`):
- `system` messages go to metadata (`system_prompt`); the first `user` message is the
  task prompt unless `task.prompt` is given; later `user` messages become observations
  with tool `user`.
- an `assistant` message with `tool_calls`: its text (if any) is a `thought`, then one
  `action` per call (arguments parsed from their JSON string; kept as the raw string
  when they are not a JSON object); parallel calls stay in their order.
- a `tool` message is an `observation` tied to its call by `tool_call_id`; `"is_error": true`
  on it (an Arbiter extension, written by the `trl` export) marks a failed tool.
- the last `assistant` message without tool calls is the `answer`; earlier ones are thoughts.
  A `Quotes:` block ending it (`\n\nQuotes:\n` then only `> ` lines), as the `trl` export
  writes an answer's quotes, becomes the answer's `quotes`.
- a call id starting `arbiter-call-` was invented by the `trl` export for an action logged
  without one: it ties the call to its result and is then left out, as it was.
- content is a string or a list of text parts; any other part (an image, Anthropic's
  `tool_use` / `tool_result` blocks, which name `--format anthropic`), a tool call of a type
  other than `function` and the legacy `function_call` field are refused with the reason:
  an import never drops what it does not understand.
- the JSON of a line is decoded strictly (`core.json_input`): no NaN, 1e400, lone
  surrogates, NUL or nesting past 64 levels.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema

from annotate.chat_messages import INVENTED_CALL_ID, QUOTES_HEADING
from core import json_input

SCHEMA_V1 = "arbiter.trajectory/v1"
SCHEMA_PATH = Path(__file__).parent / "schemas" / "trajectory.v1.schema.json"
STEP_KINDS = ("thought", "action", "observation", "answer")


class TrajectoryFormatError(ValueError):
    """The object is not a trajectory Arbiter can store; the message says why."""


class NotJson(ValueError):
    """Text inside a record that is not JSON at all: the caller may keep it as text."""


def nested_json(text: str, where: str) -> Any:
    """JSON text inside a record (tool arguments, message lists, metadata, attributes), decoded
    with the one strict decoder (core.json_input) every byte that enters goes through. Text that
    is not JSON raises `NotJson`; JSON that cannot be stored (NaN, 1e400, a lone surrogate, NUL,
    nesting too deep) is refused, naming `where`."""
    try:
        return json_input.loads(text)
    except json_input.JsonInputError as exc:
        if exc.syntax:
            raise NotJson(str(exc)) from None
        raise TrajectoryFormatError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class Limits:
    max_text_chars: int = 100_000
    max_steps: int = 500


@dataclass
class ParsedTrajectory:
    task: dict[str, Any]
    agent: dict[str, str]
    steps: list[dict[str, Any]]
    answer: str
    outcome: dict[str, Any] | None
    metadata: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""
    behaviour_hash: str = ""
    dropped: dict[str, int] = field(default_factory=dict)
    """What the converter left out on purpose, by kind (`redacted_thinking`: count)."""


@lru_cache(maxsize=1)
def _schema() -> dict:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(_schema())


@lru_cache(maxsize=1)
def _fast_check():
    """The same schema compiled to Python: ~15x faster; jsonschema only explains failures."""
    return fastjsonschema.compile(_schema())


def _where(path) -> str:
    parts = []
    for p in path:
        parts.append(f"[{p}]" if isinstance(p, int) else (f".{p}" if parts else str(p)))
    return "".join(parts) or "(top level)"


def _schema_errors(obj: dict) -> list[str]:
    try:
        _fast_check()(obj)
        return []
    except fastjsonschema.JsonSchemaException as fast_error:
        fallback = str(fast_error)
    errors = sorted(_validator().iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    messages = []
    for err in errors:
        # `if/then` failures repeat the inner error; report the inner one only.
        if err.validator in ("allOf", "if", "then") and err.context:
            continue
        messages.append(f"{_where(err.absolute_path)}: {err.message}")
    return messages or [e.message for e in errors] or [fallback]


def _check_limits(obj: Any, limits: Limits, path: str = "") -> None:
    if isinstance(obj, str):
        if "\x00" in obj:
            raise TrajectoryFormatError(
                f"{path or 'text'}: contains a NUL character (\\u0000), which text in the database cannot hold"
            )
        if len(obj) > limits.max_text_chars:
            raise TrajectoryFormatError(
                f"{path or 'text'}: text of {len(obj)} characters is over the limit of {limits.max_text_chars}"
            )
    elif isinstance(obj, dict):
        for key, value in obj.items():
            _check_limits(value, limits, f"{path}.{key}" if path else str(key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            _check_limits(value, limits, f"{path}[{i}]")


# OpenAI content part types that carry text. Any other part (an image, audio, a file, or a
# block of another vendor's format such as Anthropic's `tool_use` and `tool_result`) is
# refused: dropping it would store a trajectory without what the agent saw or did.
TEXT_PART_TYPES = ("text", "input_text", "output_text")
ANTHROPIC_ONLY_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking")


def message_text(content: Any, where: str) -> str:
    """OpenAI message content: a string, null, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict):
                raise TrajectoryFormatError(f"{where}.content[{i}]: expected a content part object")
            kind = part.get("type", "text")
            if kind not in TEXT_PART_TYPES:
                if kind in ANTHROPIC_ONLY_BLOCKS:
                    raise TrajectoryFormatError(
                        f"{where}.content[{i}]: content block type {kind!r} is not OpenAI chat; "
                        "is this an Anthropic Messages transcript? use --format anthropic"
                    )
                raise TrajectoryFormatError(
                    f"{where}.content[{i}]: content part of type {str(kind)[:40]!r} cannot be imported; "
                    f"only text parts ({', '.join(TEXT_PART_TYPES)}) are read, and nothing is dropped"
                )
            if not isinstance(part.get("text"), str):
                raise TrajectoryFormatError(f"{where}.content[{i}]: a text part needs its text as a string")
            texts.append(part["text"])
        return "\n".join(texts)
    raise TrajectoryFormatError(f"{where}.content: expected a string, a list of parts or null")


def _arguments(raw: Any, where: str = "arguments") -> dict | str:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = nested_json(raw, where) if raw.strip() else {}
        except NotJson:
            return raw
        return parsed if isinstance(parsed, dict) else raw
    return json.dumps(raw)


def _member_object(obj: dict, key: str) -> dict:
    """`obj[key]` when it is an object (a copy), {} when absent or null; anything else is refused."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TrajectoryFormatError(f"{key}: expected an object, got {json_input.type_name(value)}")
    return dict(value)


def _openai_call(call, where: str, tool_names: dict[str, str]) -> dict:
    """One entry of an assistant message's `tool_calls` as an action step; its id's tool is noted
    in `tool_names`, for the tool message that answers it."""
    if isinstance(call, dict) and call.get("type", "function") != "function":
        raise TrajectoryFormatError(
            f"{where}.type: tool call type {str(call.get('type'))[:40]!r} cannot be imported (only 'function')"
        )
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise TrajectoryFormatError(f"{where}: expected {{id, function: {{name, arguments}}}}")
    step = {"kind": "action", "tool": fn["name"], "arguments": _arguments(fn.get("arguments", ""))}
    call_id = call.get("id")
    if call_id is not None:
        if not isinstance(call_id, str):
            raise TrajectoryFormatError(f"{where}.id: expected a string")
        if not call_id.startswith(INVENTED_CALL_ID):
            step["call_id"] = call_id
        tool_names[call_id] = fn["name"]
    return step


def _openai_tool_result(msg: dict, where: str, tool_names: dict[str, str]) -> dict:
    """A `tool` message as the observation of the call it answers (by `tool_call_id`)."""
    call_id = msg.get("tool_call_id")
    if not isinstance(call_id, str) or call_id not in tool_names:
        raise TrajectoryFormatError(f"{where}: tool message answers unknown tool_call_id {call_id!r}")
    step = {"kind": "observation", "tool": tool_names[call_id], "content": message_text(msg.get("content"), where)}
    if not call_id.startswith(INVENTED_CALL_ID):
        step["call_id"] = call_id
    is_error = msg.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise TrajectoryFormatError(f"{where}.is_error: expected true, false or null")
    if is_error:
        step["is_error"] = True
    return step


def openai_chat_to_canonical(obj: dict) -> dict:
    """Map an OpenAI chat transcript onto a canonical v1 object (not yet validated)."""
    messages = obj.get("messages")
    if not isinstance(messages, list) or not messages:
        raise TrajectoryFormatError("messages: expected a non-empty list of chat messages")
    task = _member_object(obj, "task")
    metadata = _member_object(obj, "metadata")
    steps: list[dict] = []
    system_parts: list[str] = []
    tool_names: dict[str, str] = {}
    prompt_seen = bool(task.get("prompt"))
    last_plain_assistant = max(
        (
            i
            for i, m in enumerate(messages)
            if isinstance(m, dict) and m.get("role") == "assistant" and not m.get("tool_calls")
        ),
        default=-1,
    )
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise TrajectoryFormatError(f"{where}: expected an object")
        role = msg.get("role")
        if msg.get("function_call") is not None:
            raise TrajectoryFormatError(
                f"{where}.function_call: the legacy function_call field is not read; log tool calls as tool_calls"
            )
        if msg.get("audio") is not None:
            raise TrajectoryFormatError(f"{where}.audio: audio messages cannot be imported")
        if role == "system" or role == "developer":
            system_parts.append(message_text(msg.get("content"), where))
        elif role == "user":
            text = message_text(msg.get("content"), where)
            if not prompt_seen:
                task["prompt"] = text
                prompt_seen = True
            else:
                steps.append({"kind": "observation", "tool": "user", "content": text})
        elif role == "assistant":
            text = message_text(msg.get("content"), where)
            refusal = msg.get("refusal")
            if refusal is not None:
                if not isinstance(refusal, str):
                    raise TrajectoryFormatError(f"{where}.refusal: expected a string")
                text = "\n".join(t for t in (text, refusal) if t)
            calls = msg.get("tool_calls") or []
            if not isinstance(calls, list):
                raise TrajectoryFormatError(f"{where}.tool_calls: expected a list")
            if calls:
                if text.strip():
                    steps.append({"kind": "thought", "text": text})
                steps += [_openai_call(call, f"{where}.tool_calls[{j}]", tool_names) for j, call in enumerate(calls)]
            elif i == last_plain_assistant:
                steps.append(_answer_step(text))
            else:
                steps.append({"kind": "thought", "text": text})
        elif role == "tool":
            steps.append(_openai_tool_result(msg, where, tool_names))
        else:
            raise TrajectoryFormatError(
                f"{where}.role: unknown role {role!r} (expected system, user, assistant or tool)"
            )
    if not prompt_seen:
        raise TrajectoryFormatError("messages: no user message to take the task prompt from")
    if system_parts:
        metadata["system_prompt"] = "\n\n".join(system_parts)
    if obj.get("tools") is not None:
        metadata["tools"] = obj["tools"]
    return _canonical_from(obj, task=task, steps=steps, metadata=metadata)


def _answer_step(text: str) -> dict:
    """The answer, with the quotes of a trailing `Quotes:` block of `> ` lines (the `trl` export's form)."""
    head, heading, block = text.rpartition(QUOTES_HEADING)
    lines = block.split("\n")
    if heading and all(line.startswith("> ") for line in lines):
        return {"kind": "answer", "text": head, "quotes": [line[2:] for line in lines]}
    return {"kind": "answer", "text": text}


def _canonical_from(obj: dict, *, task: dict, steps: list, metadata: dict) -> dict:
    """A converted transcript as a canonical object: its agent (or `model`) and outcome come along."""
    canonical: dict[str, Any] = {"schema": SCHEMA_V1, "task": task, "steps": steps, "metadata": metadata}
    agent = obj.get("agent")
    if agent is None and isinstance(obj.get("model"), str):
        agent = {"name": obj["model"]}
    if agent is not None:
        canonical["agent"] = agent
    if "outcome" in obj:
        canonical["outcome"] = obj["outcome"]
    return canonical


# Anthropic Messages ---------------------------------------------------------------------

ANTHROPIC_USER_BLOCKS = ("text", "tool_result")
ANTHROPIC_ASSISTANT_BLOCKS = ("text", "tool_use", "thinking", "redacted_thinking")
DROPPED_REASONS = {
    "redacted_thinking": "redacted_thinking block(s) (encrypted reasoning, unreadable) were dropped",
    "trace_without_agent_run": "trace(s) held no agent run (no model, agent or tool records) and were passed over",
    "earlier_turn_message": "message(s) of earlier conversation turns, given to a later turn's model, were left out",
    "partial_trace": (
        "trajectory(ies) came from partial traces (a record's parent was not in the file; asked for "
        "with partial traces) and are marked metadata.partial_trace"
    ),
}


def _anthropic_text_blocks(value: Any, where: str) -> str:
    """A string or a list of `text` blocks (the top-level `system`, a tool_result's content)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise TrajectoryFormatError(f"{where}: expected a string or a list of text blocks")
    texts = []
    for i, block in enumerate(value):
        if not isinstance(block, dict):
            raise TrajectoryFormatError(f"{where}[{i}]: expected a content block object")
        if block.get("type") != "text":
            raise TrajectoryFormatError(
                f"{where}[{i}]: content block type {str(block.get('type'))[:40]!r} cannot be imported here; "
                "only text blocks are read, and nothing is dropped"
            )
        if not isinstance(block.get("text"), str):
            raise TrajectoryFormatError(f"{where}[{i}].text: expected a string")
        texts.append(block["text"])
    return "\n".join(texts)


def _anthropic_blocks(content: Any, where: str, allowed: tuple[str, ...], role: str) -> list[dict]:
    """Message content as a list of checked blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise TrajectoryFormatError(f"{where}.content: expected a string or a list of content blocks")
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            raise TrajectoryFormatError(f"{where}.content[{i}]: expected a content block object")
        kind = block.get("type")
        if kind not in allowed:
            raise TrajectoryFormatError(
                f"{where}.content[{i}]: content block type {str(kind)[:40]!r} cannot be imported in a {role!r} "
                f"message (read: {', '.join(allowed)}); nothing is dropped"
            )
    return content


def anthropic_to_canonical(obj: dict) -> tuple[dict, dict[str, int]]:
    """Map an Anthropic Messages transcript onto a canonical v1 object (not yet validated).

    Returns the object and what was dropped on purpose ({"redacted_thinking": n}).
    """
    messages = obj.get("messages")
    if not isinstance(messages, list) or not messages:
        raise TrajectoryFormatError("messages: expected a non-empty list of messages")
    reader = _AnthropicReader(_member_object(obj, "task"))
    metadata = _member_object(obj, "metadata")

    def has_tool_use(m: Any) -> bool:
        content = m.get("content") if isinstance(m, dict) else None
        return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content)

    last_plain_assistant = max(
        (
            i
            for i, m in enumerate(messages)
            if isinstance(m, dict) and m.get("role") == "assistant" and not has_tool_use(m)
        ),
        default=-1,
    )
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise TrajectoryFormatError(f"{where}: expected an object")
        role = msg.get("role")
        if role == "user":
            reader.user(msg, where)
        elif role == "assistant":
            reader.assistant(msg, where, answers=i == last_plain_assistant)
        else:
            hint = " (Anthropic's system prompt is the top-level 'system')" if role == "system" else ""
            raise TrajectoryFormatError(
                f"{where}.role: unknown role {str(role)[:40]!r} (expected user or assistant){hint}"
            )
    if not reader.prompt_seen:
        raise TrajectoryFormatError("messages: no user text to take the task prompt from")
    system = _anthropic_text_blocks(obj.get("system"), "system")
    if system:
        metadata["system_prompt"] = system
    tools = obj.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools
        ):
            raise TrajectoryFormatError("tools: expected a list of {name, description, input_schema}")
        metadata["tools"] = tools
    if reader.dropped:
        metadata["dropped"] = dict(reader.dropped)
    return _canonical_from(obj, task=reader.task, steps=reader.steps, metadata=metadata), reader.dropped


class _AnthropicReader:
    """The steps of an Anthropic transcript as its messages are read: the first user text is
    the task's prompt, each tool_result answers an earlier tool_use by its id."""

    def __init__(self, task: dict):
        self.task, self.steps = task, []
        self.dropped: dict[str, int] = {}
        self.tool_names: dict[str, str] = {}  # tool_use id -> the tool's name
        self.prompt_seen = bool(task.get("prompt"))

    def user(self, msg: dict, where: str) -> None:
        for j, block in enumerate(_anthropic_blocks(msg.get("content"), where, ANTHROPIC_USER_BLOCKS, "user")):
            bwhere = f"{where}.content[{j}]"
            if block["type"] == "text":
                if not isinstance(block.get("text"), str):
                    raise TrajectoryFormatError(f"{bwhere}.text: expected a string")
                if not self.prompt_seen:
                    self.task["prompt"] = block["text"]
                    self.prompt_seen = True
                else:
                    self.steps.append({"kind": "observation", "tool": "user", "content": block["text"]})
            else:
                self.steps.append(self._tool_result(block, bwhere))

    def _tool_result(self, block: dict, bwhere: str) -> dict:
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str) or call_id not in self.tool_names:
            raise TrajectoryFormatError(
                f"{bwhere}: tool_result answers unknown tool_use_id {call_id!r} (no earlier tool_use block has this id)"
            )
        step = {
            "kind": "observation",
            "tool": self.tool_names[call_id],
            "call_id": call_id,
            "content": _anthropic_text_blocks(block.get("content"), f"{bwhere}.content"),
        }
        is_error = block.get("is_error")
        if is_error is not None:
            if not isinstance(is_error, bool):
                raise TrajectoryFormatError(f"{bwhere}.is_error: expected true or false")
            if is_error:
                step["is_error"] = True
        return step

    def assistant(self, msg: dict, where: str, *, answers: bool) -> None:
        """An assistant turn; `answers`: the last one without a tool call, whose text is the answer."""
        blocks = _anthropic_blocks(msg.get("content"), where, ANTHROPIC_ASSISTANT_BLOCKS, "assistant")
        answer_texts = []
        for j, block in enumerate(blocks):
            bwhere = f"{where}.content[{j}]"
            kind = block["type"]
            if kind == "redacted_thinking":
                self.dropped["redacted_thinking"] = self.dropped.get("redacted_thinking", 0) + 1
            elif kind == "thinking":
                if not isinstance(block.get("thinking"), str):
                    raise TrajectoryFormatError(f"{bwhere}.thinking: expected a string")
                self.steps.append({"kind": "thought", "text": block["thinking"]})
            elif kind == "text":
                if not isinstance(block.get("text"), str):
                    raise TrajectoryFormatError(f"{bwhere}.text: expected a string")
                if answers:
                    answer_texts.append(block["text"])
                elif block["text"].strip():
                    self.steps.append({"kind": "thought", "text": block["text"]})
            else:
                self.steps.append(self._tool_use(block, bwhere))
        if answers:
            self.steps.append({"kind": "answer", "text": "\n".join(answer_texts)})

    def _tool_use(self, block: dict, bwhere: str) -> dict:
        call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
        if not isinstance(call_id, str) or not call_id:
            raise TrajectoryFormatError(f"{bwhere}.id: expected the tool_use id as a string")
        if not isinstance(name, str):
            raise TrajectoryFormatError(f"{bwhere}.name: expected the tool's name as a string")
        if not isinstance(arguments, dict):
            raise TrajectoryFormatError(f"{bwhere}.input: expected an object (the tool's arguments)")
        if call_id in self.tool_names:
            raise TrajectoryFormatError(f"{bwhere}.id: tool_use id {call_id!r} is used twice")
        self.tool_names[call_id] = name
        return {"kind": "action", "tool": name, "arguments": arguments, "call_id": call_id}


# Detection ------------------------------------------------------------------------------

FORMATS = ("auto", "canonical", "openai", "anthropic")
FORMAT_NAMES = {"canonical": "canonical v1", "openai": "OpenAI chat", "anthropic": "Anthropic Messages"}
_OPENAI_ROLES = ("system", "developer", "tool")
_OPENAI_KEYS = ("tool_calls", "tool_call_id", "function_call")


def detect_format(obj: dict) -> str:
    """The format of one decoded line, from its content (the rule in docs/formats/anthropic.md).

    - a `schema` key: canonical;
    - a `messages` list: Anthropic if a message's content list holds a `tool_use`,
      `tool_result`, `thinking` or `redacted_thinking` block, or if there is a top-level
      `system`; OpenAI if a message has role system/developer/tool or a `tool_calls`,
      `tool_call_id` or `function_call` key. Signs of both: refused as ambiguous. Signs of
      neither (plain user/assistant text, which both read the same way): OpenAI.
    """
    if "schema" in obj:
        return "canonical"
    messages = obj.get("messages")
    if not isinstance(messages, list):
        raise TrajectoryFormatError(
            f"neither a canonical trajectory (a 'schema' key, {SCHEMA_V1!r}) "
            "nor a chat transcript (a 'messages' list: OpenAI chat or Anthropic Messages)"
        )
    anthropic = "system" in obj
    openai = False
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        if msg.get("role") in _OPENAI_ROLES or any(k in msg for k in _OPENAI_KEYS):
            openai = True
        content = msg.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ANTHROPIC_ONLY_BLOCKS for b in content
        ):
            anthropic = True
    if anthropic and openai:
        raise TrajectoryFormatError(
            "ambiguous transcript: it has both OpenAI chat signs (tool_calls, a tool or system role) and "
            "Anthropic Messages signs (tool_use/tool_result/thinking blocks, a top-level system); "
            "name the format: --format openai or --format anthropic"
        )
    return "anthropic" if anthropic else "openai"


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def trajectory_hashes(*, task: dict, agent: dict, steps: list, answer: str) -> tuple[str, str]:
    """(content hash, behaviour hash), with the steps serialized once.

    The content hash is sha256 over what makes two trajectories the same episode (task with
    its environment when it names one, agent, steps, answer; not the metadata): the JSON of that object with sorted keys,
    written out piece by piece. The behaviour hash leaves out the task and the agent: two
    trajectories with the same one did the same thing under different agent names.
    """
    steps_json, answer_json = _dump(steps), _dump(answer)
    # A task is its environment's (when it names one): the same episode in two environments is two.
    task_json = _dump(
        {
            "external_id": task["external_id"],
            "prompt": task["prompt"],
            **({"environment": task["environment"]} if task.get("environment") else {}),
        }
    )
    content = f'{{"agent":{_dump(agent)},"answer":{answer_json},"steps":{steps_json},"task":{task_json}}}'
    behaviour = f'{{"answer":{answer_json},"steps":{steps_json}}}'
    return hashlib.sha256(content.encode()).hexdigest(), hashlib.sha256(behaviour.encode()).hexdigest()


def content_hash(*, task: dict, agent: dict, steps: list, answer: str) -> str:
    """sha256 over what makes two trajectories the same episode (not their metadata)."""
    return trajectory_hashes(task=task, agent=agent, steps=steps, answer=answer)[0]


def behaviour_hash(*, steps: list, answer: str) -> str:
    """sha256 over the steps and the answer alone (see `trajectory_hashes`)."""
    return hashlib.sha256(f'{{"answer":{_dump(answer)},"steps":{_dump(steps)}}}'.encode()).hexdigest()


def parse_trajectory(obj: Any, limits: Limits = Limits(), format: str = "auto") -> ParsedTrajectory:
    """Check one decoded object and return it in canonical form.

    `format` is one of FORMATS; "auto" detects it per object (`detect_format`).
    """
    if not isinstance(obj, dict):
        raise TrajectoryFormatError(f"expected a JSON object, got {type(obj).__name__}")
    kind = detect_format(obj) if format == "auto" else format
    dropped: dict[str, int] = {}
    if kind == "canonical":
        if "schema" not in obj:
            raise TrajectoryFormatError(
                f"schema: a canonical trajectory needs 'schema': {SCHEMA_V1!r} (or name its format)"
            )
        if obj["schema"] != SCHEMA_V1:
            raise TrajectoryFormatError(f"schema: unknown schema version {obj['schema']!r} (expected {SCHEMA_V1!r})")
    elif "schema" in obj:
        raise TrajectoryFormatError(f"schema: a 'schema' key marks a canonical trajectory, not {FORMAT_NAMES[kind]}")
    elif kind == "openai":
        obj = openai_chat_to_canonical(obj)
    elif kind == "anthropic":
        obj, dropped = anthropic_to_canonical(obj)
    else:
        raise TrajectoryFormatError(f"unknown format {format!r} (expected one of {', '.join(FORMATS)})")
    problems = _schema_errors(obj)
    if problems:
        raise TrajectoryFormatError("; ".join(problems[:5]) + (" ..." if len(problems) > 5 else ""))
    if len(obj["steps"]) > limits.max_steps:
        raise TrajectoryFormatError(f"steps: {len(obj['steps'])} steps is over the limit of {limits.max_steps}")
    _check_limits(obj, limits)

    task = dict(obj["task"])
    if not task.get("external_id"):
        task["external_id"] = "prompt-" + hashlib.sha256(task["prompt"].encode()).hexdigest()[:16]
    agent = {"name": "unknown", "version": ""}
    agent.update(obj.get("agent") or {})
    steps = obj["steps"]
    answer = obj.get("answer")
    if answer is None:
        answer = next((s["text"] for s in reversed(steps) if s["kind"] == "answer"), "")
    content, behaviour = trajectory_hashes(task=task, agent=agent, steps=steps, answer=answer)
    return ParsedTrajectory(
        task=task,
        agent=agent,
        steps=steps,
        answer=answer,
        outcome=obj.get("outcome"),
        metadata=obj.get("metadata") or {},
        content_hash=content,
        behaviour_hash=behaviour,
        dropped=dropped,
    )


def parse_line(raw: bytes, limits: Limits = Limits(), format: str = "auto") -> ParsedTrajectory:
    """One JSONL line (bytes) to a trajectory; every failure is a TrajectoryFormatError."""
    try:
        obj = json_input.loads(raw)
    except json_input.JsonInputError as exc:
        raise TrajectoryFormatError(str(exc)) from None
    return parse_trajectory(obj, limits, format)
