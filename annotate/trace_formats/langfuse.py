"""Langfuse traces: a trace and its observations, as canonical v1 trajectories.

Plain Python, no Django. Implements the Langfuse public API's data model as
`GET /api/public/traces/{id}` (`TraceWithFullDetails`) and `GET /api/public/observations`
(`ObservationsView`) return it, and as the UI's JSON/JSONL export writes it: observation
types SPAN, EVENT, GENERATION and the agent types added in 2025 (AGENT, TOOL, CHAIN,
RETRIEVER, EVALUATOR, EMBEDDING, GUARDRAIL); levels DEBUG, DEFAULT, WARNING, ERROR.

Three line shapes are read, one JSON object per line, and may be mixed in one file:

- a trace with its observations embedded: `{"id", "timestamp", "name", "input", "output",
  "sessionId", "userId", "metadata", "tags", "release", "version", "observations": [...],
  "scores": [...]}`;
- a trace without observations (or with only their ids, as `GET /traces` lists them);
- one observation per line: `{"id", "traceId", "type", "name", "startTime", "endTime",
  "parentObservationId", "input", "output", "model", "modelParameters", "level",
  "statusMessage", "metadata", "version"}`.

Every record is filed under its trace id (`trace.id`, `observation.traceId`). A trace's
observations are walked in execution order: from the roots, children by `startTime` (ties
by file order), depth first, through `parentObservationId`.

One trajectory per AGENT observation (a nested agent has its own trajectory and is an
action with its observation in its parent's); a trace without AGENT observations is one
trajectory. Within a run (the observations whose nearest AGENT ancestor is the run's):

- GENERATION: a model call. `input` is a list of OpenAI-style chat messages (`role`,
  `content`, `tool_calls`, `tool_call_id`), `{"messages": [...]}` or a plain string (a user
  message); `output` an assistant message, a list of them, `{"choices": [{"message"}]}` (one
  choice) or a string. Read with `Transcript.model_input` / `model_output`: content is a
  string or text parts (image parts are counted as `image`), assistant
  `reasoning_content`/`reasoning` is a thought, `refusal` text is kept with the content,
  tool calls are OpenAI's `{id, function: {name, arguments}}` or LangChain's `{id, name,
  args}`. `tools` in `input` or in `modelParameters` (a list or its JSON text) are the
  declared tools. A GENERATION at level ERROR contributes its input only and is counted as
  `failed_generation`.
- TOOL, RETRIEVER, GUARDRAIL: a tool execution (`Transcript.tool_execution`): `name` the
  tool, `input` the arguments, `output` the result, level ERROR is `is_error` (with
  `statusMessage` as the result when there is no output, or after it), a
  `metadata.tool_call_id` string ties it to its call. What ran under one is the tool's own
  work: counted as `inside_tool` (nested AGENTs there are their own trajectories).
- AGENT nested in the run: an action named after it with its input, and its output as the
  observation.
- SPAN and CHAIN with children: structure, walked through. A leaf SPAN or CHAIN with input
  or output is counted as `span` (not guessed into a tool call).
- EVENT (a point-in-time log) is counted as `event`; EMBEDDING as `embedding` (vectors);
  EVALUATOR as `evaluator` (a judgement of the run, not the agent's work).
- Outside every AGENT of a trace that has some: counted as `outside_agent` in the trace's
  first trajectory. The trace's `scores` are counted as `score` there too.

Task prompt: the first user message of the run's model calls, else the AGENT's (or the
trace's) `input`. Answer: the last assistant text without tool calls, else the AGENT's (or
the trace's) `output`. Agent: the AGENT's name, else the trace's name, else the first
model; version from the AGENT's `version`, else the trace's `version`, else `release`.
Metadata: `source_format`, `trace_id`, `agent_observation_id`, `trace_name`, `session_id`,
`user_id`, `tags` and the trace's `metadata` as `trace_metadata`. Usage, costs, latency,
prompt links and timestamps are not content and are not kept. Anything else malformed
(wrong types, an unknown type, level, role or content part, an unparseable time, an
observation of another trace, a duplicate id, a listed observation not in the file, a
parent cycle) is refused with the record at fault. Unknown extra fields are not refused:
Langfuse adds fields between versions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from annotate.input_records import at
from annotate.trace_formats.spans import execution_order, iso_nanos
from annotate.trace_formats.transcript import Message, ToolCall, Transcript, text_of
from annotate.trajectory_formats import NotJson, TrajectoryFormatError, nested_json

NAME = "langfuse"
TITLE = "Langfuse traces"
DROPPED_REASONS = {
    "event": "EVENT observation(s) were dropped",
    "embedding": "EMBEDDING observation(s) were dropped",
    "evaluator": "EVALUATOR observation(s) were dropped",
    "inside_tool": "observation(s) inside a tool were dropped (the tool's own input and output are kept)",
    "failed_generation": "GENERATION(s) at ERROR level were dropped (their input is still read)",
    "image": "image part(s) of messages were dropped",
    "outside_agent": "observation(s) outside every AGENT observation were dropped",
    "score": "trace score(s) were dropped",
    "span": "childless SPAN or CHAIN observation(s) with content were dropped",
}

OBSERVATION_TYPES = (
    "GENERATION",
    "SPAN",
    "EVENT",
    "AGENT",
    "TOOL",
    "CHAIN",
    "RETRIEVER",
    "EVALUATOR",
    "EMBEDDING",
    "GUARDRAIL",
)
LEVELS = ("DEBUG", "DEFAULT", "WARNING", "ERROR")
TOOL_TYPES = ("TOOL", "RETRIEVER", "GUARDRAIL")
STRUCTURE_TYPES = ("SPAN", "CHAIN")
DROPPED_TYPES = {"EVENT": "event", "EMBEDDING": "embedding", "EVALUATOR": "evaluator"}
TRACE_KEYS = ("input", "output", "observations", "sessionId")
OTHER_FORMAT_KEYS = ("run_type", "schema", "messages", "resourceSpans", "resource_spans")
TEXT_PART_TYPES = ("text", "input_text", "output_text")
IMAGE_PART_TYPES = ("image_url", "input_image", "image")


# Detection and records --------------------------------------------------------------------


def _is_observation(obj: dict) -> bool:
    kind = obj.get("type")
    return "traceId" in obj and "spanId" not in obj and isinstance(kind, str) and kind.upper() in OBSERVATION_TYPES


def _is_trace(obj: dict) -> bool:
    return "id" in obj and "timestamp" in obj and any(key in obj for key in TRACE_KEYS)


def looks_like(obj: Any) -> bool:
    """A Langfuse trace (with or without observations) or one observation."""
    if not isinstance(obj, dict) or any(key in obj for key in OTHER_FORMAT_KEYS):
        return False
    return _is_observation(obj) or _is_trace(obj)


def records(obj: Any) -> Iterator[tuple[str, dict]]:
    """A trace line as `{"trace": ...}` and one `{"observation": ...}` per embedded
    observation; an observation line as `{"observation": ...}`; all under the trace id."""
    if not isinstance(obj, dict):
        raise TrajectoryFormatError("expected a Langfuse trace or observation object")
    if "traceId" in obj and "observations" not in obj:  # its type is checked in `convert`
        trace_id = _string(obj.get("traceId"), f"observation {obj.get('id')!r}: traceId")
        yield trace_id, {"observation": obj}
        return
    if "id" not in obj or "timestamp" not in obj:
        raise TrajectoryFormatError(
            'not a Langfuse record: expected a trace ({"id", "timestamp", ...}) or an observation '
            '({"id", "traceId", "type", ...})'
        )
    trace_id = _string(obj.get("id"), "trace id")
    observations = obj.get("observations") or []
    if not isinstance(observations, list):
        raise TrajectoryFormatError(f"trace {trace_id!r}: observations: expected a list")
    embedded = [o for o in observations if isinstance(o, dict)]
    if embedded and len(embedded) != len(observations):
        raise TrajectoryFormatError(
            f"trace {trace_id!r}: observations: expected a list of observation objects or of ids, not both"
        )
    if not embedded and not all(isinstance(o, str) for o in observations):
        raise TrajectoryFormatError(f"trace {trace_id!r}: observations: expected objects or id strings")
    trace = {key: value for key, value in obj.items() if key != "observations"}
    trace["observationIds"] = [] if embedded else observations
    yield trace_id, {"trace": trace}
    for i, observation in enumerate(embedded):
        where = f"trace {trace_id!r}: observations[{i}]"
        if observation.get("traceId") not in (None, trace_id):
            raise TrajectoryFormatError(f"{where}: traceId {str(observation['traceId'])[:60]!r} is another trace")
        yield trace_id, {"observation": {**observation, "traceId": trace_id}}


# Reading one trace ------------------------------------------------------------------------


def convert(records: list[tuple[int, dict]]) -> list[tuple[dict, dict[str, int]]]:
    """One trace's records as one canonical object per agent run (see the module docstring)."""
    trace, nodes = _read(records)
    order = execution_order(nodes) if nodes else []
    by_id = {node["span_id"]: node for node in order}
    children: set[str] = {node["parent_id"] for node in order if node["parent_id"] in by_id}
    agent_of, tool_of = _owners(order, by_id)
    agents = [node for node in order if node["type"] == "AGENT"]
    runs = agents or [None]
    out = []
    for n, root in enumerate(runs):
        transcript = Transcript()
        run_id = root["span_id"] if root else None
        members = [node for node in order if agent_of[node["span_id"]] == run_id]
        for node in members:
            _walk(node, transcript, children, inside_tool=tool_of[node["span_id"]] is not None)
        if n == 0:
            _drop_outside(order, agent_of, children, transcript, bool(agents))
            scores = (trace or {}).get("scores") or []
            if scores:
                transcript.drop("score", len(scores))
        out.append(_canonical(transcript, trace, root, order))
    return out


def _read(records: list[tuple[int, dict]]) -> tuple[dict | None, list[dict]]:
    """The trace record (or None) and the observations as tree nodes, checked."""
    trace = None
    nodes: list[dict] = []
    seen: dict[str, int] = {}
    for line, record in records:
        if not isinstance(record, dict) or ("trace" in record) == ("observation" in record):
            raise TrajectoryFormatError(f"{at(line)}: not a Langfuse trace or observation record")
        if "trace" in record:
            if trace is not None:
                raise TrajectoryFormatError(f"trace {trace['id']!r} appears twice ({at(trace['line'])} and {at(line)})")
            trace = _trace(record["trace"], line)
            continue
        node = _node(record["observation"], line)
        if node["span_id"] in seen:
            raise TrajectoryFormatError(
                f"{node['where']}: observation id {node['span_id']!r} appears twice ({at(seen[node['span_id']])} "
                f"and {at(line)})"
            )
        seen[node["span_id"]] = line
        nodes.append(node)
    missing = [i for i in (trace or {}).get("observationIds", []) if i not in seen]
    if missing:
        raise TrajectoryFormatError(
            f"trace {trace['id']!r} ({at(trace['line'])}) lists observations that are not in the file: "
            f"{', '.join(map(repr, missing[:3]))}"
        )
    return trace, nodes


def _trace(trace: Any, line: int) -> dict:
    if not isinstance(trace, dict):
        raise TrajectoryFormatError(f"{at(line)}: a trace must be an object")
    where = f"trace {trace.get('id')!r} ({at(line)})"
    for key in ("name", "sessionId", "userId", "release", "version"):
        _optional_string(trace.get(key), f"{where}: {key}")
    if trace.get("tags") is not None and not (
        isinstance(trace["tags"], list) and all(isinstance(t, str) for t in trace["tags"])
    ):
        raise TrajectoryFormatError(f"{where}: tags: expected a list of strings")
    if trace.get("scores") is not None and not isinstance(trace["scores"], list):
        raise TrajectoryFormatError(f"{where}: scores: expected a list")
    iso_nanos(trace.get("timestamp"), f"{where}: timestamp")
    return {**trace, "line": line}


def _node(obs: Any, line: int) -> dict:
    """An observation as a tree node for `spans.execution_order`, its fields checked."""
    if not isinstance(obs, dict):
        raise TrajectoryFormatError(f"{at(line)}: an observation must be an object")
    name = obs.get("name")
    obs_id = _string(obs.get("id"), f"observation ({at(line)}): id")
    if isinstance(name, str) and name:
        where = f"observation {name!r} (id {obs_id!r}, {at(line)})"
    else:
        where = f"observation {obs_id!r} ({at(line)})"
    kind = obs.get("type")
    if not isinstance(kind, str) or kind.upper() not in OBSERVATION_TYPES:
        raise TrajectoryFormatError(
            f"{where}: type {str(kind)[:40]!r} is not a Langfuse observation type ({', '.join(OBSERVATION_TYPES)})"
        )
    level = obs.get("level") or "DEFAULT"
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise TrajectoryFormatError(f"{where}: level {str(level)[:40]!r} is not one of {', '.join(LEVELS)}")
    _optional_string(name, f"{where}: name")
    for key in ("statusMessage", "model", "version"):
        _optional_string(obs.get(key), f"{where}: {key}")
    return {
        "trace_id": _string(obs.get("traceId"), f"{where}: traceId"),
        "span_id": obs_id,
        "parent_id": _optional_string(obs.get("parentObservationId"), f"{where}: parentObservationId") or None,
        "start": iso_nanos(obs.get("startTime"), f"{where}: startTime"),
        "type": kind.upper(),
        "level": level.upper(),
        "where": where,
        "obs": obs,
    }


def _owners(order: list[dict], by_id: dict[str, dict]) -> tuple[dict, dict]:
    """For each observation, its nearest AGENT ancestor and the nearest tool between them."""
    agent_of: dict[str, str | None] = {}
    tool_of: dict[str, str | None] = {}
    for node in order:  # parents come before their children
        parent = by_id.get(node["parent_id"])
        if parent is None:
            agent_of[node["span_id"]] = tool_of[node["span_id"]] = None
        elif parent["type"] == "AGENT":
            agent_of[node["span_id"]], tool_of[node["span_id"]] = parent["span_id"], None
        else:
            agent_of[node["span_id"]] = agent_of[parent["span_id"]]
            tool_of[node["span_id"]] = parent["span_id"] if parent["type"] in TOOL_TYPES else tool_of[parent["span_id"]]
    return agent_of, tool_of


# One run ------------------------------------------------------------------------------


def _walk(node: dict, transcript: Transcript, children: set[str], *, inside_tool: bool) -> None:
    """What one observation of a run adds to its transcript."""
    kind, obs = node["type"], node["obs"]
    try:
        if inside_tool:
            if kind != "AGENT" and not _structure(node, children):
                transcript.drop("inside_tool")
        elif kind == "GENERATION":
            _generation(node, transcript)
        elif kind in TOOL_TYPES or kind == "AGENT":
            transcript.tool_execution(
                name=_tool_name(node),
                arguments=obs.get("input"),
                result=_result(node),
                call_id=_call_id(node),
                is_error=node["level"] == "ERROR",
            )
        elif kind in DROPPED_TYPES:
            transcript.drop(DROPPED_TYPES[kind])
        elif not _structure(node, children) and (obs.get("input") is not None or obs.get("output") is not None):
            transcript.drop("span")
    except TrajectoryFormatError as exc:
        raise TrajectoryFormatError(f"{node['where']}: {exc}") from None


def _structure(node: dict, children: set[str]) -> bool:
    """A SPAN or CHAIN that wraps others: its own input and output repeat what they hold."""
    return node["type"] in STRUCTURE_TYPES and node["span_id"] in children


def _drop_outside(
    order: list[dict], agent_of: dict, children: set[str], transcript: Transcript, has_agents: bool
) -> None:
    if not has_agents:
        return
    for node in order:
        if agent_of[node["span_id"]] is None and node["type"] != "AGENT" and not _structure(node, children):
            transcript.drop("outside_agent")


def _generation(node: dict, transcript: Transcript) -> None:
    """A model call: its input messages, its declared tools, and its output."""
    obs = node["obs"]
    raw = obs.get("input")
    if isinstance(raw, dict) and "messages" in raw:
        transcript.declare_tools(_tools(raw.get("tools"), "input.tools"))
        raw = raw["messages"]
    params = obs.get("modelParameters")
    if params is not None and not isinstance(params, dict):
        raise TrajectoryFormatError("modelParameters: expected an object")
    transcript.declare_tools(_tools((params or {}).get("tools"), "modelParameters.tools"))
    if raw is not None:
        transcript.model_input(_input_messages(raw, transcript))
    if node["level"] == "ERROR":
        transcript.drop("failed_generation")
    elif obs.get("output") is not None:
        transcript.model_output(_output_messages(obs["output"], transcript))


def _tools(raw: Any, where: str) -> list:
    """Declared tools: a list, or (modelParameters values are strings) its JSON text."""
    if raw is None:
        return []
    if isinstance(raw, str):
        try:
            raw = nested_json(raw, where)
        except NotJson:
            raise TrajectoryFormatError(f"{where}: not a JSON list of tools") from None
    if not isinstance(raw, list):
        raise TrajectoryFormatError(f"{where}: expected a list of tools")
    return raw


def _input_messages(raw: Any, transcript: Transcript) -> list[Message]:
    if isinstance(raw, str):
        return [Message(role="user", text=raw)]
    if not isinstance(raw, list):
        raise TrajectoryFormatError(
            f"input: a {type(raw).__name__} is not a model input (expected a list of chat messages, "
            '{"messages": [...]} or a string)'
        )
    return [_message(m, f"input[{i}]", transcript) for i, m in enumerate(raw)]


def _output_messages(raw: Any, transcript: Transcript) -> list[Message]:
    if isinstance(raw, str):
        return [Message(role="assistant", text=raw)]
    if isinstance(raw, dict) and "choices" in raw:
        choices = raw["choices"]
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            raise TrajectoryFormatError("output.choices: expected exactly one choice with its message")
        raw = choices[0].get("message")
        return [_message(raw, "output.choices[0].message", transcript)]
    if isinstance(raw, dict) and "role" in raw:
        return [_message(raw, "output", transcript)]
    if isinstance(raw, list):
        return [_message(m, f"output[{i}]", transcript) for i, m in enumerate(raw)]
    raise TrajectoryFormatError(
        f"output: a {type(raw).__name__} without a role is not a model output (expected an assistant "
        'message, a list of them, {"choices": [...]} or a string)'
    )


def _message(raw: Any, where: str, transcript: Transcript) -> Message:
    """One OpenAI-style chat message."""
    if not isinstance(raw, dict):
        raise TrajectoryFormatError(f"{where}: expected a chat message object")
    role = raw.get("role")
    if role == "developer":
        role = "system"
    if role not in ("system", "user", "assistant", "tool"):
        raise TrajectoryFormatError(
            f"{where}.role: {str(role)[:40]!r} is not a chat role (system, developer, user, assistant, tool)"
        )
    for key in ("function_call", "audio"):
        if raw.get(key) is not None:
            raise TrajectoryFormatError(f"{where}.{key}: {key} messages cannot be imported")
    message = Message(role=role, text=_content(raw.get("content"), where, transcript))
    if role == "assistant":
        refusal = _optional_string(raw.get("refusal"), f"{where}.refusal")
        message.text = "\n".join(t for t in (message.text, refusal) if t)
        key = "reasoning_content" if "reasoning_content" in raw else "reasoning"
        message.reasoning = _optional_string(raw.get(key), f"{where}.{key}")
        calls = raw.get("tool_calls") or []
        if not isinstance(calls, list):
            raise TrajectoryFormatError(f"{where}.tool_calls: expected a list")
        message.calls = [_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(calls)]
    if role == "tool":
        message.call_id = _optional_string(raw.get("tool_call_id"), f"{where}.tool_call_id") or None
        message.name = _optional_string(raw.get("name"), f"{where}.name") or None
    return message


def _content(content: Any, where: str, transcript: Transcript) -> str:
    """Message content: a string, null, or a list of text parts (images are counted, not kept)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise TrajectoryFormatError(f"{where}.content: expected a string, a list of parts or null")
    texts = []
    for i, part in enumerate(content):
        kind = part.get("type", "text") if isinstance(part, dict) else None
        if kind in IMAGE_PART_TYPES:
            transcript.drop("image")
        elif kind in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            raise TrajectoryFormatError(
                f"{where}.content[{i}]: part type {str(kind)[:40]!r} cannot be imported (only text parts, "
                "and images, which are counted as dropped)"
            )
    return "\n".join(texts)


def _call(raw: Any, where: str) -> ToolCall:
    """A tool call: OpenAI's `{id, type: function, function: {name, arguments}}` or the
    LangChain shape `{id, name, args}`."""
    if not isinstance(raw, dict):
        raise TrajectoryFormatError(f"{where}: expected a tool call object")
    call_id = _optional_string(raw.get("id"), f"{where}.id") or None
    if isinstance(raw.get("function"), dict):
        if raw.get("type", "function") != "function":
            raise TrajectoryFormatError(f"{where}.type: tool call type {str(raw['type'])[:40]!r} is not 'function'")
        name, arguments = raw["function"].get("name"), raw["function"].get("arguments")
    else:
        name, arguments = raw.get("name"), raw.get("args")
    if not isinstance(name, str) or not name:
        raise TrajectoryFormatError(f"{where}: expected the tool's name (function.name or name)")
    return ToolCall(name=name, arguments=arguments, id=call_id)


def _tool_name(node: dict) -> str:
    name = node["obs"].get("name")
    if not isinstance(name, str) or not name:
        raise TrajectoryFormatError(f"a {node['type']} observation needs its name (the tool's name)")
    return name


def _result(node: dict) -> str:
    """A tool's output as text; at level ERROR, its statusMessage too."""
    obs = node["obs"]
    result = _output_text(obs.get("output")) or ""
    message = obs.get("statusMessage") or ""
    if node["level"] == "ERROR" and message and message not in result:
        result = f"{result}\n{message}" if result else message
    return result


def _call_id(node: dict) -> str | None:
    metadata = node["obs"].get("metadata")
    call_id = metadata.get("tool_call_id") if isinstance(metadata, dict) else None
    return call_id if isinstance(call_id, str) and call_id else None


# The trajectory -------------------------------------------------------------------------


def _canonical(
    transcript: Transcript, trace: dict | None, root: dict | None, order: list[dict]
) -> tuple[dict, dict[str, int]]:
    """The run as a canonical object: prompt and answer fallbacks, agent, provenance."""
    owner = root["obs"] if root else (trace or {})
    if root:
        where = root["where"]
    elif trace:
        where = f"trace {trace['id']!r} ({at(trace['line'])})"
    else:
        where = f"trace {order[0]['trace_id']!r}"
    task = {}
    fallback = _input_text(owner.get("input"))
    if transcript.prompt is None and fallback:
        task["prompt"] = fallback
    try:
        return transcript.canonical(
            agent=_agent(trace, root, order),
            final_output=_output_text(owner.get("output")),
            task=task,
            metadata=_metadata(trace, root, order),
        )
    except TrajectoryFormatError as exc:
        raise TrajectoryFormatError(f"{where}: {exc}") from None


def _agent(trace: dict | None, root: dict | None, order: list[dict]) -> dict:
    trace = trace or {}
    models = [n["obs"]["model"] for n in order if n["type"] == "GENERATION" and n["obs"].get("model")]
    name = (root and root["obs"].get("name")) or trace.get("name") or (models[0] if models else "unknown")
    version = (root and root["obs"].get("version")) or trace.get("version") or trace.get("release") or ""
    return {"name": name[:200], "version": version[:100]}


def _metadata(trace: dict | None, root: dict | None, order: list[dict]) -> dict:
    trace = trace or {}
    metadata: dict[str, Any] = {"source_format": NAME, "trace_id": trace.get("id") or order[0]["trace_id"]}
    if root:
        metadata["agent_observation_id"] = root["span_id"]
    for key, name in (
        ("name", "trace_name"),
        ("sessionId", "session_id"),
        ("userId", "user_id"),
        ("tags", "tags"),
        ("metadata", "trace_metadata"),
    ):
        if trace.get(key):
            metadata[name] = trace[key]
    return metadata


def _input_text(value: Any) -> str | None:
    """An agent's or trace's input as a task prompt: a string, the first user message of a
    message list, else the value as JSON."""
    messages = value.get("messages") if isinstance(value, dict) else value
    if isinstance(messages, list):
        for m in messages:
            if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str):
                return m["content"]
    return text_of(value) or None


def _output_text(value: Any) -> str | None:
    """An agent's, trace's or tool's output as text: a string, an assistant message's
    content, the last assistant message of a list, else the value as JSON."""
    if value is None:
        return None
    messages = value.get("messages") if isinstance(value, dict) and "role" not in value else value
    if isinstance(messages, dict):
        messages = [messages]
    if isinstance(messages, list):
        for m in reversed(messages):
            if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("content"), str):
                return m["content"]
    return text_of(value)


# Values ---------------------------------------------------------------------------------


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise TrajectoryFormatError(f"{where}: expected a non-empty string")
    return value


def _optional_string(value: Any, where: str) -> str:
    if value is not None and not isinstance(value, str):
        raise TrajectoryFormatError(f"{where}: expected a string, got {type(value).__name__}")
    return value or ""
