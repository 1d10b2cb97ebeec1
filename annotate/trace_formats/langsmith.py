"""LangSmith runs (`Client.list_runs()` / `GET /runs` exports) as canonical v1 trajectories.

Plain Python, no Django. Implements the run schema of the LangSmith SDK (`langsmith.schemas.Run`,
langsmith-sdk 0.1 and later, the same fields as the REST API's run schema): one run per line, `{"id", "trace_id", "parent_run_id", "dotted_order",
"run_type", "name", "inputs", "outputs", "error", "start_time", "end_time", "extra", "tags"}`, or
a run loaded with its children nested in `child_runs` (one line holding a whole trace).

Grouping: a run is filed under its `trace_id`; without one, under the root id that begins its
`dotted_order` ("20240101T000000000000Z<root-id>.20240101T000001000000Z<child-id>"); a run with
neither and no `parent_run_id` is a root, filed under its own `id`. The runs in `child_runs`
are filed under their root's trace, each with its parent's id as `parent_run_id`.

Order: a trace's runs are walked as they ran: from each root, children by `start_time` (from
`dotted_order` where the time is missing; ties in file order), depth first. Each root run is
one agent run, so one trajectory (a trace normally has one root).

What maps to what:
- `llm` runs, in both shapes LangSmith writes them:
  LangChain's (`inputs.messages` a batch of one list of serialized messages, `{"lc": 1,
  "type": "constructor", "id": [..., "HumanMessage"], "kwargs": {...}}`, or plain message dicts
  `{"type": "human", "content", ...}`, also `{"type", "data": {...}}`; `outputs.generations`
  `[[{"text", "message"}]]`) and the OpenAI wrapper's (`wrap_openai`: `inputs.messages` a list
  of `{"role", "content", "tool_calls"}`, `outputs.choices[0].message`). The input messages go
  to `Transcript.model_input` (system text to the system prompt, the first user text to the
  task prompt, later user text to observations with tool `user`, tool messages to the
  observations of their calls), the output message to `model_output` (thinking parts and
  `additional_kwargs.reasoning_content` a thought, text a thought or the answer, `tool_calls`
  `{name, args, id}` / `{id, function: {name, arguments}}` actions in order,
  `invalid_tool_calls` actions with the raw argument text). Declared tools
  (`extra.invocation_params.tools`, or `inputs.tools` for the wrapper) go to `declare_tools`.
- `tool` runs: `Transcript.tool_execution` with the run's `name` as the tool; arguments are
  `inputs`, except LangChain's `{"input": "<text>"}` (the only key, a string), whose text is
  the arguments (a JSON object in it is parsed, else the raw string is kept); the result is
  `outputs.output` (a serialized ToolMessage gives its content, `tool_call_id` and
  `status: "error"`), else `outputs` as JSON; `error` set: `is_error` with the error text as
  the result.
- `retriever` runs: an action (the run's name, `inputs` as arguments) and its observation,
  the documents as "[i] page_content" paragraphs (with " (source)" where metadata has one).
- `chain`, `prompt` and `parser` runs: structural, no steps; the root run (any type) gives the
  task prompt when no model call had a user message (`inputs.messages`' first user text, else
  its only string input, else its inputs as JSON) and the agent's output (`outputs.output`,
  `outputs.messages`' last text, its only string output, else its outputs as JSON) as
  `final_output`: the answer when no model output was plain text, else kept in metadata
  `agent_output` where it differs.
- agent: `{name: the root run's name (the model name when the root is itself an llm run),
  version: extra.metadata.revision_id or ""}`. metadata: `source_format` "langsmith",
  `trace_id`, `root_run_id`, the root's `tags`, `thread_id` (extra.metadata thread_id,
  session_id or conversation_id) and `error` (the root run's error) where present.

Dropped on purpose, counted with `Transcript.drop`: `embedding` runs (`embedding_run`), runs
nested inside a tool run (`tool_inner_run`: a sub-agent's own model calls, a retriever the
tool wraps; the tool run's own arguments and result are the action and observation), image
parts of a message (`image`), generations or choices past the first (`extra_generation`), and
model calls that failed without output (`failed_model_call`). Everything else not understood
(other run types, completion-model `prompts`, the Responses API, message or content types
not listed, malformed ids, times or shapes) is refused, naming the run and its line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from annotate.input_records import at
from annotate.trace_formats.spans import execution_order, iso_nanos
from annotate.trace_formats.transcript import Message, ToolCall, Transcript, text_of
from annotate.trajectory_formats import TrajectoryFormatError
from core.ids import ascii_digits

NAME = "langsmith"
TITLE = "LangSmith runs"
DROPPED_REASONS = {
    "embedding_run": "embedding run(s) were dropped (vectors, nothing to read)",
    "tool_inner_run": "run(s) nested inside a tool run were dropped (the tool's own arguments and result are kept)",
    "image": "image part(s) of messages were dropped",
    "extra_generation": "generation(s) past the first of a model call were dropped",
    "failed_model_call": "model call(s) that failed without output were dropped",
    "run_without_agent": (
        "tool, retriever, prompt, parser or embedding run(s) with no agent or model run above them in the file "
        "(a partial export's orphans, or a tool traced alone) were passed over: no task or agent to file them under"
    ),
}
# The run types that can stand for an episode at the root of a trace: an agent (a chain or graph)
# or a single model call. A root of another type (an orphaned tool run of a partial export) has
# no task: its inputs are a tool's arguments.
EPISODE_ROOTS = ("chain", "llm")

RUN_TYPES = ("llm", "chain", "tool", "retriever", "prompt", "parser", "embedding")
# LangChain message classes (the last part of a serialized message's `id`) and `type` values.
LANGCHAIN_ROLES = {
    "HumanMessage": "user",
    "HumanMessageChunk": "user",
    "human": "user",
    "AIMessage": "assistant",
    "AIMessageChunk": "assistant",
    "ai": "assistant",
    "SystemMessage": "system",
    "SystemMessageChunk": "system",
    "system": "system",
    "ToolMessage": "tool",
    "ToolMessageChunk": "tool",
    "tool": "tool",
}
OPENAI_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
TEXT_PARTS = ("text", "input_text", "output_text")
IMAGE_PARTS = ("image_url", "image", "input_image")
DOTTED_TIME_CHARS = 22  # "20240101T000000000000Z"


def looks_like(obj: Any) -> bool:
    """A run: `run_type` and at least one of the keys that tie it into a trace."""
    return (
        isinstance(obj, dict)
        and "run_type" in obj
        and any(key in obj for key in ("trace_id", "dotted_order", "parent_run_id", "child_runs"))
    )


# Filing runs under their trace ------------------------------------------------------------


def records(obj: Any) -> Iterator[tuple[str, dict]]:
    """(trace key, run) for the run of one line and every run nested in its `child_runs`."""
    if not isinstance(obj, dict):
        raise TrajectoryFormatError(f"expected a run object, got {type(obj).__name__}")
    key = _trace_key(obj, _where(obj))
    for run in _flatten(obj, None, key):
        yield key, run


def _flatten(run: dict, parent_id: str | None, trace_key: str) -> Iterator[dict]:
    """The run without its `child_runs`, then its children's runs, depth first."""
    where = _where(run)
    children = run.get("child_runs")
    if children is not None and not isinstance(children, list):
        raise TrajectoryFormatError(f"{where}: child_runs is not a list")
    flat = {k: v for k, v in run.items() if k != "child_runs"}
    if parent_id is not None:
        if flat.get("parent_run_id") not in (None, parent_id):
            raise TrajectoryFormatError(
                f"{where}: parent_run_id {flat['parent_run_id']!r} is not the run it is nested in ({parent_id!r})"
            )
        flat["parent_run_id"] = parent_id
        if flat.get("trace_id") is None:
            flat["trace_id"] = trace_key
    yield flat
    for i, child in enumerate(children or []):
        if not isinstance(child, dict):
            raise TrajectoryFormatError(f"{where}: child_runs[{i}] is not a run object")
        yield from _flatten(child, _id(run, where), trace_key)


def _trace_key(run: dict, where: str) -> str:
    trace_id = run.get("trace_id")
    if trace_id is not None:
        if not isinstance(trace_id, str) or not trace_id:
            raise TrajectoryFormatError(f"{where}: trace_id is not a non-empty string")
        return trace_id
    if run.get("dotted_order") is not None:
        return _dotted(run, where)[0][1]
    if run.get("parent_run_id") is None:
        return _id(run, where)
    raise TrajectoryFormatError(
        f"{where}: a child run without trace_id or dotted_order cannot be filed under its trace"
    )


def _dotted(run: dict, where: str) -> list[tuple[int, str]]:
    """`dotted_order` as [(start ns, run id), ...] from the root down to this run."""
    order = run["dotted_order"]
    if not isinstance(order, str) or not order:
        raise TrajectoryFormatError(f"{where}: dotted_order is not a non-empty string")
    segments = []
    for segment in order.split("."):
        stamp, run_id = segment[:DOTTED_TIME_CHARS], segment[DOTTED_TIME_CHARS:]
        try:  # by slicing: strptime is the slowest part of reading a run
            digits = stamp[:8] + stamp[9:21]
            if not (len(stamp) == DOTTED_TIME_CHARS and ascii_digits(digits) and stamp[8] == "T" and stamp[21] == "Z"):
                raise ValueError
            moment = datetime(
                int(stamp[0:4]),
                int(stamp[4:6]),
                int(stamp[6:8]),
                int(stamp[9:11]),
                int(stamp[11:13]),
                int(stamp[13:15]),
                int(stamp[15:21]),
                tzinfo=timezone.utc,
            )
        except ValueError:
            raise TrajectoryFormatError(
                f"{where}: dotted_order segment {segment[:60]!r} is not <YYYYMMDDTHHMMSSffffffZ><run id>"
            ) from None
        if not run_id:
            raise TrajectoryFormatError(f"{where}: dotted_order segment {segment[:60]!r} has no run id")
        segments.append((int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000, run_id))
    return segments


# Reading one trace ------------------------------------------------------------------------


def convert(records: list[tuple[int, Any]]) -> list[tuple[dict | None, dict[str, int]]]:
    """One trace's runs as canonical objects, one per root run that is an agent or a model call,
    in execution order; a root of another type is (None, what was passed over)."""
    nodes = [_node(line, run) for line, run in records]
    seen: set[str] = set()
    for node in nodes:
        if node["span_id"] in seen:
            raise TrajectoryFormatError(f"{node['where']}: run id {node['span_id']!r} appears twice in the trace")
        seen.add(node["span_id"])
    ordered = execution_order(nodes)
    ids = {node["span_id"] for node in nodes}
    agents: list[list[dict]] = []
    for node in ordered:
        if node["parent_id"] not in ids:
            agents.append([])
        agents[-1].append(node)
    return [
        _agent(group) if group[0]["run"]["run_type"] in EPISODE_ROOTS else (None, {"run_without_agent": 1})
        for group in agents
    ]


def _node(line: int, run: Any) -> dict:
    """A run as the span-like dict `spans.execution_order` sorts, with the run inside."""
    if not isinstance(run, dict):
        raise TrajectoryFormatError(f"{at(line)}: expected a run object")
    where = _where(run, line)
    run_id = _id(run, where)
    for key in ("name", "run_type"):
        if not isinstance(run.get(key), str) or not run[key]:
            raise TrajectoryFormatError(f"{where}: {key} is missing or not a string")
    extra = _dict(run.get("extra") or {}, f"{where}: extra")
    _dict(extra.get("metadata") or {}, f"{where}: extra.metadata")
    _dict(extra.get("invocation_params") or {}, f"{where}: extra.invocation_params")
    if run["run_type"] not in RUN_TYPES:
        raise TrajectoryFormatError(
            f"{where}: run_type {run['run_type'][:40]!r} is unknown (expected one of {', '.join(RUN_TYPES)})"
        )
    dotted = _dotted(run, where) if run.get("dotted_order") is not None else None
    if dotted and dotted[-1][1] != run_id:
        raise TrajectoryFormatError(f"{where}: dotted_order does not end with the run's id")
    parent = run.get("parent_run_id")
    if parent is None and dotted and len(dotted) > 1:
        parent = dotted[-2][1]
    if parent is not None and (not isinstance(parent, str) or not parent):
        raise TrajectoryFormatError(f"{where}: parent_run_id is not a non-empty string")
    if run.get("start_time") is not None:
        start = iso_nanos(run["start_time"], f"{where}: start_time")
    elif dotted:
        start = dotted[-1][0]
    else:
        raise TrajectoryFormatError(f"{where}: the run has neither start_time nor dotted_order")
    return {
        "trace_id": run.get("trace_id"),
        "span_id": run_id,
        "parent_id": parent,
        "start": start,
        "run": run,
        "where": where,
    }


def _agent(nodes: list[dict]) -> tuple[dict, dict[str, int]]:
    """One root run and the runs under it (in execution order) as one trajectory."""
    root = nodes[0]["run"]
    transcript = Transcript()
    inside_tool: set[str] = set()
    images: set[str] = set()
    for node in nodes:
        run, where = node["run"], node["where"]
        if node["parent_id"] in inside_tool:
            inside_tool.add(node["span_id"])
            transcript.drop("tool_inner_run")
            continue
        kind = run["run_type"]
        if kind == "llm":
            _llm(run, where, transcript, images)
        elif kind == "tool":
            _tool(run, where, transcript, images)
            inside_tool.add(node["span_id"])
        elif kind == "retriever":
            _retriever(run, where, transcript)
        elif kind == "embedding":
            transcript.drop("embedding_run")
    root_where = nodes[0]["where"]
    task = None if transcript.prompt else {"prompt": _root_prompt(root, root_where, images)}
    if images:
        transcript.drop("image", len(images))
    final = None if root["run_type"] == "llm" else _root_output(root, root_where)
    return transcript.canonical(
        agent=_agent_of(root, root_where), final_output=final, task=task, metadata=_metadata(root)
    )


# Run types ------------------------------------------------------------------------------------


def _llm(run: dict, where: str, transcript: Transcript, images: set[str]) -> None:
    """A model call: the messages it was given, the tools it was offered, what it answered."""
    inputs = _dict(run.get("inputs"), f"{where}: inputs")
    if "messages" not in inputs:
        if "prompts" in inputs:
            raise TrajectoryFormatError(
                f"{where}: inputs.prompts is a text-completion model call; only chat model calls "
                "(inputs.messages) can be imported"
            )
        raise TrajectoryFormatError(f"{where}: inputs.messages is missing (expected the chat messages of the call)")
    messages = inputs["messages"]
    if not isinstance(messages, list):
        raise TrajectoryFormatError(f"{where}: inputs.messages is not a list")
    if messages and all(isinstance(m, list) for m in messages):  # LangChain: a batch of prompts
        if len(messages) != 1:
            raise TrajectoryFormatError(
                f"{where}: inputs.messages holds a batch of {len(messages)} prompts; one model call per run is read"
            )
        messages = messages[0]
    transcript.model_input([_message(m, f"{where}: inputs.messages[{i}]", images) for i, m in enumerate(messages)])
    extra = run.get("extra") or {}
    tools = inputs.get("tools") or (extra.get("invocation_params") or {}).get("tools")
    if tools is not None and not isinstance(tools, list):
        raise TrajectoryFormatError(f"{where}: the declared tools are not a list")
    transcript.declare_tools(tools)
    _llm_output(run, where, transcript, images)


def _llm_output(run: dict, where: str, transcript: Transcript, images: set[str]) -> None:
    outputs = run.get("outputs")
    if not outputs:
        if run.get("error"):
            transcript.drop("failed_model_call")
        return
    outputs = _dict(outputs, f"{where}: outputs")
    if "generations" in outputs:
        batch = outputs["generations"]
        if not isinstance(batch, list) or len(batch) != 1 or not isinstance(batch[0], list) or not batch[0]:
            raise TrajectoryFormatError(f"{where}: outputs.generations is not [[generation, ...]] for one prompt")
        generations = batch[0]
        first = _dict(generations[0], f"{where}: outputs.generations[0][0]")
        if first.get("message") is not None:
            message = _message(first["message"], f"{where}: outputs.generations[0][0].message", images)
        elif isinstance(first.get("text"), str):
            message = Message(role="assistant", text=first["text"])
        else:
            raise TrajectoryFormatError(f"{where}: outputs.generations[0][0] has neither message nor text")
    elif "choices" in outputs:
        generations = outputs["choices"]
        if not isinstance(generations, list) or not generations:
            raise TrajectoryFormatError(f"{where}: outputs.choices is not a non-empty list")
        choice = _dict(generations[0], f"{where}: outputs.choices[0]")
        message = _message(choice.get("message"), f"{where}: outputs.choices[0].message", images)
    else:
        raise TrajectoryFormatError(
            f"{where}: outputs hold neither generations (LangChain) nor choices (OpenAI chat completion): "
            f"{', '.join(map(str, outputs))[:80]!r}"
        )
    if len(generations) > 1:
        transcript.drop("extra_generation", len(generations) - 1)
    transcript.model_output([message])


def _tool(run: dict, where: str, transcript: Transcript, images: set[str]) -> None:
    """A tool the agent ran: its arguments, and its result or error."""
    inputs = _dict(run.get("inputs") or {}, f"{where}: inputs")
    arguments: Any = inputs
    if list(inputs) == ["input"] and isinstance(inputs["input"], str):
        arguments = inputs["input"]  # LangChain's string input: the text is the arguments
    result, call_id, is_error = _tool_result(run, where, images)
    transcript.tool_execution(name=run["name"], arguments=arguments, result=result, call_id=call_id, is_error=is_error)


def _tool_result(run: dict, where: str, images: set[str]) -> tuple[str, str | None, bool]:
    """(result text, call id, is_error) from a tool run's outputs or error."""
    error = run.get("error")
    if error is not None and not isinstance(error, str):
        raise TrajectoryFormatError(f"{where}: error is not a string")
    if error:
        return error, None, True
    outputs = run.get("outputs")
    if outputs is None:
        return "", None, False
    outputs = _dict(outputs, f"{where}: outputs")
    if "output" not in outputs:
        return text_of(outputs), None, False
    output = outputs["output"]
    if _is_serialized(output) or (isinstance(output, dict) and output.get("type") == "tool"):
        message = _langchain_message(output, f"{where}: outputs.output", images)
        if message.role != "tool":
            raise TrajectoryFormatError(f"{where}: outputs.output is a {message.role} message, not a ToolMessage")
        return message.text, message.call_id, message.is_error
    return text_of(output), None, False


def _retriever(run: dict, where: str, transcript: Transcript) -> None:
    """A retrieval: the query as the action, the documents found as its observation."""
    inputs = _dict(run.get("inputs") or {}, f"{where}: inputs")
    error = run.get("error")
    if error:
        transcript.tool_execution(name=run["name"], arguments=inputs, result=str(error), is_error=True)
        return
    outputs = _dict(run.get("outputs") or {}, f"{where}: outputs")
    documents = outputs.get("documents", [])
    if not isinstance(documents, list):
        raise TrajectoryFormatError(f"{where}: outputs.documents is not a list")
    paragraphs = []
    for i, document in enumerate(documents):
        document = _dict(document, f"{where}: outputs.documents[{i}]")
        content = document.get("page_content")
        if not isinstance(content, str):
            raise TrajectoryFormatError(f"{where}: outputs.documents[{i}].page_content is not a string")
        metadata = document.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise TrajectoryFormatError(f"{where}: outputs.documents[{i}].metadata is not an object")
        source = metadata.get("source")
        paragraphs.append(f"[{i}] ({source}) {content}" if source else f"[{i}] {content}")
    transcript.tool_execution(name=run["name"], arguments=inputs, result="\n\n".join(paragraphs))


# Messages ---------------------------------------------------------------------------------


def _message(raw: Any, where: str, images: set[str]) -> Message:
    """One message, serialized by LangChain, as a LangChain dict, or as OpenAI chat."""
    if not isinstance(raw, dict):
        raise TrajectoryFormatError(f"{where}: expected a message object")
    if _is_serialized(raw) or "type" in raw:
        return _langchain_message(raw, where, images)
    if "role" in raw:
        return _openai_message(raw, where, images)
    raise TrajectoryFormatError(
        f'{where}: not a message (expected a serialized LangChain message, {{"type": ...}} or {{"role": ...}})'
    )


def _is_serialized(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.get("lc") == 1 and isinstance(raw.get("id"), list)


def _langchain_message(raw: dict, where: str, images: set[str]) -> Message:
    if _is_serialized(raw):
        if raw.get("type") != "constructor" or not raw["id"]:
            raise TrajectoryFormatError(f"{where}: a serialized object that is not a message constructor")
        kind, body = str(raw["id"][-1]), _dict(raw.get("kwargs") or {}, f"{where}.kwargs")
    else:
        kind = raw.get("type")
        body = _dict(raw["data"], f"{where}.data") if "data" in raw else raw
    role = LANGCHAIN_ROLES.get(kind) if isinstance(kind, str) else None
    if role is None:
        raise TrajectoryFormatError(
            f"{where}: message type {str(kind)[:40]!r} cannot be imported (expected Human, AI, System or Tool)"
        )
    text, reasoning, part_calls = _content(body.get("content"), where, images)
    extra = body.get("additional_kwargs") or {}
    reasoning = reasoning or (extra.get("reasoning_content") if isinstance(extra, dict) else "") or ""
    message = Message(role=role, text=text, reasoning=reasoning)
    if role == "assistant":
        message.calls = _langchain_calls(body, extra, part_calls, where)
    elif role == "tool":
        message.call_id = body.get("tool_call_id")
        message.name = body.get("name")
        message.is_error = body.get("status") == "error"
    return message


def _langchain_calls(body: dict, extra: dict, part_calls: list[ToolCall], where: str) -> list[ToolCall]:
    """An AI message's calls: `tool_calls`, else OpenAI-style ones in `additional_kwargs`; then
    `invalid_tool_calls` (arguments kept as the raw text) and `tool_use` parts not named already."""
    calls = []
    tool_calls = body.get("tool_calls")
    if not tool_calls and isinstance(extra, dict) and extra.get("tool_calls"):
        calls = _openai_calls(extra["tool_calls"], f"{where}.additional_kwargs.tool_calls")
    for field in ("tool_calls", "invalid_tool_calls"):
        items = body.get(field) or []
        if not isinstance(items, list):
            raise TrajectoryFormatError(f"{where}.{field}: expected a list")
        for i, call in enumerate(items):
            call = _dict(call, f"{where}.{field}[{i}]")
            if not isinstance(call.get("name"), str) or not call["name"]:
                raise TrajectoryFormatError(f"{where}.{field}[{i}]: the call has no tool name")
            if call.get("id") is not None and not isinstance(call["id"], str):
                raise TrajectoryFormatError(f"{where}.{field}[{i}].id: expected a string")
            calls.append(ToolCall(name=call["name"], arguments=call.get("args"), id=call.get("id")))
    for call in calls + part_calls:
        if call.id is not None and not isinstance(call.id, str):
            raise TrajectoryFormatError(f"{where}: a tool call id is a {type(call.id).__name__}, not a string")
    named = {call.id for call in calls}
    return calls + [call for call in part_calls if call.id not in named]


def _openai_message(raw: dict, where: str, images: set[str]) -> Message:
    role = OPENAI_ROLES.get(raw["role"]) if isinstance(raw["role"], str) else None
    if role is None:
        raise TrajectoryFormatError(f"{where}: role {str(raw['role'])[:40]!r} cannot be imported")
    if raw.get("function_call"):
        raise TrajectoryFormatError(f"{where}: the legacy function_call field cannot be imported")
    text, reasoning, part_calls = _content(raw.get("content"), where, images)
    message = Message(
        role=role,
        text=text,
        reasoning=reasoning,
        call_id=raw.get("tool_call_id"),
        name=raw.get("name") if role == "tool" else None,
    )
    if role == "assistant":
        message.calls = _openai_calls(raw.get("tool_calls") or [], f"{where}.tool_calls") + part_calls
    return message


def _openai_calls(items: Any, where: str) -> list[ToolCall]:
    if not isinstance(items, list):
        raise TrajectoryFormatError(f"{where}: expected a list")
    calls = []
    for i, call in enumerate(items):
        function = _dict(_dict(call, f"{where}[{i}]").get("function"), f"{where}[{i}].function")
        if call.get("type", "function") != "function":
            raise TrajectoryFormatError(f"{where}[{i}]: a tool call of type {str(call['type'])[:40]!r}")
        if not isinstance(function.get("name"), str) or not function["name"]:
            raise TrajectoryFormatError(f"{where}[{i}].function: the call has no tool name")
        calls.append(ToolCall(name=function["name"], arguments=function.get("arguments"), id=call.get("id")))
    return calls


def _content(content: Any, where: str, images: set[str]) -> tuple[str, str, list[ToolCall]]:
    """(text, reasoning, tool_use calls) of a content string or list of parts. Image parts are
    left out and added to `images` (as JSON: every model call repeats the history, so each
    distinct image is counted once)."""
    if content is None:
        return "", "", []
    if isinstance(content, str):
        return content, "", []
    if not isinstance(content, list):
        raise TrajectoryFormatError(f"{where}.content: expected a string or a list of parts")
    texts, thinking, calls = [], [], []
    for i, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        part = _dict(part, f"{where}.content[{i}]")
        kind = part.get("type")
        if kind in TEXT_PARTS and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "thinking" and isinstance(part.get("thinking"), str):
            thinking.append(part["thinking"])
        elif kind == "tool_use" and isinstance(part.get("name"), str):
            calls.append(ToolCall(name=part["name"], arguments=part.get("input"), id=part.get("id")))
        elif kind in IMAGE_PARTS:
            images.add(json.dumps(part, sort_keys=True))
        else:
            raise TrajectoryFormatError(
                f"{where}.content[{i}]: a content part of type {str(kind)[:40]!r} cannot be imported "
                "(text, thinking and tool_use parts are read, images dropped)"
            )
    return "\n".join(texts), "\n".join(thinking), calls


# The root run -----------------------------------------------------------------------------


def _root_prompt(root: dict, where: str, images: set[str]) -> str:
    """The task prompt from the root run's inputs, when no model call had a user message."""
    inputs = _dict(root.get("inputs") or {}, f"{where}: inputs")
    if isinstance(inputs.get("messages"), list):
        for i, raw in enumerate(inputs["messages"]):
            message = _message(raw, f"{where}: inputs.messages[{i}]", images)
            if message.role == "user" and message.text.strip():
                return message.text
    strings = [value for value in inputs.values() if isinstance(value, str)]
    if len(inputs) == 1 and strings and strings[0].strip():
        return strings[0]
    if inputs:
        return text_of(inputs)
    raise TrajectoryFormatError(
        f"{where}: no user input to take the task prompt from (no model call "
        "had a user message and the root run has no inputs)"
    )


def _root_output(root: dict, where: str) -> str | None:
    """What the agent returned: `outputs.output`, the last text of `outputs.messages`, the
    only string output, else the outputs as JSON."""
    outputs = root.get("outputs")
    if not outputs:
        return None
    outputs = _dict(outputs, f"{where}: outputs")
    if isinstance(outputs.get("output"), str):
        return outputs["output"]
    if isinstance(outputs.get("messages"), list) and outputs["messages"]:
        # the last message is a model output already read (its images counted there): text only
        last = _message(outputs["messages"][-1], f"{where}: outputs.messages[-1]", set())
        return last.text if last.role == "assistant" and not last.calls else None
    strings = [value for value in outputs.values() if isinstance(value, str)]
    return strings[0] if len(outputs) == 1 and strings else text_of(outputs)


def _agent_of(root: dict, where: str) -> dict:
    metadata = (root.get("extra") or {}).get("metadata") or {}
    name = root["name"]
    if root["run_type"] == "llm":
        name = _model_name(root) or name
    version = metadata.get("revision_id") or ""
    if not isinstance(version, str):
        raise TrajectoryFormatError(f"{where}: extra.metadata.revision_id is not a string")
    return {"name": name[:200], "version": version[:100]}


def _model_name(run: dict) -> str | None:
    extra = run.get("extra") or {}
    for value in (
        (extra.get("metadata") or {}).get("ls_model_name"),
        (extra.get("invocation_params") or {}).get("model"),
        (extra.get("invocation_params") or {}).get("model_name"),
        (run.get("inputs") or {}).get("model"),
    ):
        if isinstance(value, str) and value:
            return value
    return None


def _metadata(root: dict) -> dict:
    metadata = {"source_format": NAME, "trace_id": root.get("trace_id") or root["id"], "root_run_id": root["id"]}
    run_metadata = (root.get("extra") or {}).get("metadata") or {}
    for key in ("thread_id", "session_id", "conversation_id"):
        if isinstance(run_metadata.get(key), str):
            metadata["thread_id"] = run_metadata[key]
            break
    if root.get("tags"):
        metadata["tags"] = root["tags"]
    if root.get("error"):
        metadata["error"] = root["error"]
    return metadata


# Small readers ------------------------------------------------------------------------------


def _where(run: dict, line: int | None = None) -> str:
    kind = run.get("run_type") if isinstance(run.get("run_type"), str) else "?"
    name = run.get("name") if isinstance(run.get("name"), str) else "?"
    return f"{kind} run {name[:60]!r}" + (f" ({at(line)})" if line is not None else "")


def _id(run: dict, where: str) -> str:
    run_id = run.get("id")
    if not isinstance(run_id, str) or not run_id:
        raise TrajectoryFormatError(f"{where}: id is missing or not a string")
    return run_id


def _dict(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise TrajectoryFormatError(f"{where}: expected an object, got {type(value).__name__}")
    return value
