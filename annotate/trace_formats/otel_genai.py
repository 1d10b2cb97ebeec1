"""OpenTelemetry GenAI spans (semantic conventions v1.41.0) as canonical v1 trajectories.

Plain Python, no Django. Implements the GenAI semantic conventions as released in
open-telemetry/semantic-conventions v1.41.0 (docs/gen-ai/gen-ai-spans.md,
gen-ai-agent-spans.md, gen-ai-events.md and the JSON schemas gen-ai-input-messages.json,
gen-ai-output-messages.json, gen-ai-system-instructions.json, gen-ai-tool-definitions.json;
the last release before the conventions moved to open-telemetry/semantic-conventions-genai),
and also reads the per-message span events those conventions deprecated in v1.37.0.
Input is OTLP JSON or a span per line (`spans.span_records`); records are spans, filed by
trace id. The mapping is in docs/formats/otel.md; in short:

- each `invoke_agent` span (`gen_ai.operation.name`) is one trajectory. Its subtree is
  walked in execution order (`spans.execution_order`). An `invoke_agent` span nested in
  another is its own trajectory too, and in the parent it is an action (tool = the
  sub-agent's name, arguments `{"input": its task prompt}`) with its answer as the
  observation; its inner spans add no steps to the parent. A trace with model calls or
  tool executions and no `invoke_agent` span is one trajectory; a trace with neither gives
  none (the import counts it as passed over).
- a model call (`chat`, `text_completion`, `generate_content`): `gen_ai.input.messages`
  -> `Transcript.model_input`, `gen_ai.output.messages` -> `model_output`,
  `gen_ai.system_instructions` -> `system`, `gen_ai.tool.definitions` -> `declare_tools`;
  read from the span's attributes, else from its `gen_ai.client.inference.operation.details`
  event, else from the deprecated events `gen_ai.system.message`, `gen_ai.user.message`,
  `gen_ai.assistant.message`, `gen_ai.tool.message` (input) and `gen_ai.choice` (output).
  Message parts: `text` -> text, `reasoning` -> thought, `tool_call` -> action,
  `tool_call_response` -> observation of its call.
- an `execute_tool` span: `Transcript.tool_execution` with `gen_ai.tool.name`,
  `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`;
  status ERROR or `error.type` -> `is_error`. Without a captured result, a call a model
  asked for is answered by the next model call's `tool_call_response`. Spans inside a tool
  span are the tool's own work and add no steps.
- the `invoke_agent` span: its `gen_ai.input.messages` are the agent's input (the task
  prompt), its output text is the agent's final output, `gen_ai.agent.name` and
  `gen_ai.agent.version` are the agent (else `gen_ai.request.model`, else the resource's
  `service.name`).

Dropped, counted in `dropped`: `blob`, `uri`, `file`, `server_tool_call` and
`server_tool_call_response` message parts, `embeddings` and `retrieval` spans, model calls
inside a tool span, GenAI spans outside every agent run, `gen_ai.evaluation.result` events.
Refused: a model call without captured content (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT),
an unknown operation, part type or `gen_ai.*` event, attributes of the pre-1.28
`gen_ai.prompt` / `gen_ai.completion` form, and any malformed value.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from annotate.input_records import at
from annotate.trace_formats import spans as span_io
from annotate.trace_formats.transcript import Message, ToolCall, Transcript, arguments_of, text_of
from annotate.trajectory_formats import NotJson, TrajectoryFormatError, nested_json
from core.ids import ascii_digits

NAME = "otel"
TITLE = "OpenTelemetry GenAI"
SEMCONV_VERSION = "1.41.0"

OPERATION = "gen_ai.operation.name"
AGENT = "invoke_agent"
TOOL = "execute_tool"
MODEL_OPERATIONS = ("chat", "text_completion", "generate_content")
WRAPPERS = ("create_agent", "invoke_workflow")  # structure: their children are read
DROPPED_OPERATIONS = {"embeddings": "embeddings_span", "retrieval": "retrieval_span"}

INPUT = "gen_ai.input.messages"
OUTPUT = "gen_ai.output.messages"
SYSTEM = "gen_ai.system_instructions"
TOOLS = "gen_ai.tool.definitions"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
CONTENT_KEYS = (INPUT, OUTPUT, SYSTEM, "gen_ai.tool.call.arguments", "gen_ai.tool.call.result")

# The deprecated per-message events (before v1.37.0): the role each one stands for.
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
KNOWN_EVENTS = (*MESSAGE_EVENTS, CHOICE_EVENT, DETAILS_EVENT, "gen_ai.evaluation.result")

DROPPED_PARTS = ("blob", "uri", "file", "server_tool_call", "server_tool_call_response")
DROPPED_REASONS = {
    "blob_part": "inline binary message part(s) (images, audio) were dropped",
    "uri_part": "message part(s) referring to media by URI were dropped",
    "file_part": "message part(s) referring to an uploaded file were dropped",
    "server_tool_call_part": "server-side tool call part(s) (run by the provider) were dropped",
    "server_tool_call_response_part": "server-side tool response part(s) were dropped",
    "embeddings_span": "embeddings span(s) were dropped",
    "retrieval_span": "retrieval span(s) (retrieved documents) were dropped",
    "model_call_inside_tool": "model call(s) made inside a tool's own span were dropped",
    "span_outside_agent": "span(s) outside every agent span (invoke_agent, AGENT) were dropped",
    "evaluation_event": "gen_ai.evaluation.result event(s) were dropped",
}
CAPTURE_SETTING = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


# The module interface ---------------------------------------------------------------------


def looks_like(obj: Any) -> bool:
    """An OTLP JSON line or a span per line whose spans carry GenAI attributes (not OpenInference)."""
    if not (span_io.is_otlp(obj) or span_io.is_span_json(obj)):
        return False
    try:
        spans = [span for _, span in span_io.span_records(obj)]
    except TrajectoryFormatError:
        return False
    return claims(spans)


def claims(spans: list[dict]) -> bool:
    """Whether one trace's normalized spans follow the GenAI conventions: some span has a
    `gen_ai.*` attribute or event, and none is an OpenInference span."""
    genai = False
    for span in spans:
        attributes = span.get("attributes") or {}
        if "openinference.span.kind" in attributes:
            return False
        genai = (
            genai
            or any(key.startswith("gen_ai.") for key in attributes)
            or any(str(event.get("name", "")).startswith("gen_ai.") for event in span.get("events") or [])
        )
    return genai


def records(obj: Any) -> Iterator[tuple[str, dict]]:
    """Each span of one line, filed under its trace id."""
    yield from span_io.span_records(obj)


def convert(records: list[tuple[int, Any]]) -> list[tuple[dict, dict[str, int]]]:
    """One trace's spans as one trajectory per agent run (see the module docstring); none
    when the trace holds no agent, model or tool span."""
    spans, lines = [], {}
    for line, record in records:
        if (
            not isinstance(record, dict)
            or not isinstance(record.get("span_id"), str)
            or not isinstance(record.get("attributes"), dict)
        ):
            raise TrajectoryFormatError(f"{at(line)}: not a span record")
        spans.append(record)
        lines.setdefault(record["span_id"], line)
    if not spans:
        raise TrajectoryFormatError("the trace holds no spans")
    return _Trace(span_io.execution_order(spans), lines).runs()


# One trace --------------------------------------------------------------------------------


class _Transcript(Transcript):
    """A Transcript that also keeps the call ids the model asked for, and counts each dropped
    part once: every model call repeats the conversation, its images included."""

    def __init__(self) -> None:
        super().__init__()
        self.requested: set[str] = set()
        self._parts_dropped: set[str] = set()

    def drop_part(self, kind: str, part: dict) -> None:
        key = json.dumps([kind, part], sort_keys=True, ensure_ascii=False)
        if key not in self._parts_dropped:
            self._parts_dropped.add(key)
            self.drop(kind)


class _Trace:
    def __init__(self, order: list[dict], lines: dict[str, int]) -> None:
        self.order = order
        self.lines = lines
        self.by_id = {span["span_id"]: span for span in order}
        self.done: dict[str, tuple[dict, dict]] = {}  # agent span id -> its trajectory

    def runs(self) -> list[tuple[dict, dict]]:
        for span in self.order:
            self._check_operation(span)
        agents = [span for span in self.order if _operation(span) == AGENT]
        if not agents:
            if not any(_operation(span) in (*MODEL_OPERATIONS, TOOL) for span in self.order):
                return []  # no agent run (a web server's spans): the import counts it as passed over
            return [self._run(None, {})]
        outside = self._outside(agents)
        return [self._agent(span, outside if i == 0 else {}) for i, span in enumerate(agents)]

    def where(self, span: dict) -> str:
        return f"span {span['name'][:80]!r} ({at(self.lines.get(span['span_id'], '?'))})"

    def _check_operation(self, span: dict) -> None:
        operation = _operation(span)
        attributes = span["attributes"]
        legacy = next((k for k in attributes if _legacy(k)), None)
        if legacy is not None:
            raise TrajectoryFormatError(
                f"{self.where(span)}: attribute {legacy[:60]!r} is the pre-1.28 (OpenLLMetry) message form, "
                f"not read; this importer reads {INPUT} / {OUTPUT} (GenAI conventions v{SEMCONV_VERSION})"
            )
        if operation is None:
            content = next((k for k in CONTENT_KEYS if _has(attributes, k)), None) or next(
                (e["name"] for e in span["events"] if e["name"] in (*MESSAGE_EVENTS, CHOICE_EVENT, DETAILS_EVENT)), None
            )
            if content is not None:
                raise TrajectoryFormatError(f"{self.where(span)}: carries {content} but no {OPERATION}")
        elif not isinstance(operation, str) or operation not in (
            AGENT,
            TOOL,
            *MODEL_OPERATIONS,
            *WRAPPERS,
            *DROPPED_OPERATIONS,
        ):
            raise TrajectoryFormatError(
                f"{self.where(span)}: {OPERATION} {str(operation)[:40]!r} cannot be imported (read: "
                f"{', '.join((AGENT, TOOL, *MODEL_OPERATIONS, *WRAPPERS, *DROPPED_OPERATIONS))})"
            )

    def _outside(self, agents: list[dict]) -> dict[str, int]:
        """GenAI work no agent run holds (a model call before the agent started): counted."""
        inside = set()
        for agent in agents:
            inside.add(agent["span_id"])
            inside.update(s["span_id"] for s in span_io.descendants(agent, self.order))
        count = sum(
            1
            for span in self.order
            if span["span_id"] not in inside and (_operation(span) in (*MODEL_OPERATIONS, TOOL, *DROPPED_OPERATIONS))
        )
        return {"span_outside_agent": count} if count else {}

    # Agent runs -------------------------------------------------------------------------

    def _agent(self, span: dict, extra_drops: dict[str, int]) -> tuple[dict, dict]:
        if span["span_id"] not in self.done:
            self.done[span["span_id"]] = self._run(span, extra_drops)
        return self.done[span["span_id"]]

    def _run(self, root: dict | None, extra_drops: dict[str, int]) -> tuple[dict, dict]:
        """One trajectory: the subtree of `root` (an invoke_agent span), or the whole trace."""
        transcript = _Transcript()
        for kind, n in extra_drops.items():
            transcript.drop(kind, n)
        final_output = None
        if root is not None:
            final_output = self._guard(root, lambda: self._agent_span(root, transcript))
        inner = span_io.descendants(root, self.order) if root is not None else self.order
        covered: dict[str, str] = {}  # span id -> "tool" | "agent": a span whose subtree adds no steps
        for span in inner:
            operation = _operation(span)
            cover = covered.get(span["parent_id"])
            if cover is not None:
                covered[span["span_id"]] = "agent" if cover == "agent" or operation == AGENT else "tool"
                if covered[span["span_id"]] == "tool" and operation in MODEL_OPERATIONS:
                    transcript.drop("model_call_inside_tool")
                continue
            if operation == AGENT:
                covered[span["span_id"]] = "agent"
                self._guard(span, lambda: self._sub_agent(span, transcript))
            elif operation == TOOL:
                covered[span["span_id"]] = "tool"
                self._guard(span, lambda: self._tool(span, transcript))
            elif operation in MODEL_OPERATIONS:
                self._guard(span, lambda: self._model(span, transcript))
            elif operation in DROPPED_OPERATIONS:
                transcript.drop(DROPPED_OPERATIONS[operation])
            elif operation in WRAPPERS:
                self._guard(span, lambda: self._wrapper(span, transcript))
        head = root if root is not None else self.order[0]
        try:
            return transcript.canonical(
                agent=self._agent_of(root, inner), final_output=final_output, metadata=self._metadata(root, head)
            )
        except TrajectoryFormatError as exc:
            raise TrajectoryFormatError(f"{self.where(head)}: {exc}") from None

    def _guard(self, span: dict, work):
        """Run one span's mapping; a refusal names the span and its line."""
        try:
            return work()
        except TrajectoryFormatError as exc:
            if str(exc).startswith("span "):  # a sub-agent's span, named already
                raise
            raise TrajectoryFormatError(f"{self.where(span)}: {exc}") from None

    def _agent_span(self, span: dict, transcript: _Transcript) -> str | None:
        """The invoke_agent span's own content: its input, instructions, tools; returns its output text."""
        self._events(span, transcript)
        self._wrapper(span, transcript)
        attributes = span["attributes"]
        if _has(attributes, INPUT):
            transcript.model_input(_messages(_structured(attributes, INPUT), INPUT, transcript.drop_part))
        if not _has(attributes, OUTPUT):
            return None
        outputs = _messages(_structured(attributes, OUTPUT), OUTPUT, lambda kind, part: None)  # model calls hold them
        text = "\n".join(m.text for m in outputs if m.text.strip())
        return text or None

    def _wrapper(self, span: dict, transcript: _Transcript) -> None:
        """create_agent / invoke_workflow / invoke_agent: the instructions and tools they declare."""
        attributes = span["attributes"]
        if _has(attributes, SYSTEM):
            transcript.system(_parts_text(_structured(attributes, SYSTEM), SYSTEM, transcript.drop_part))
        if _has(attributes, TOOLS):
            transcript.declare_tools(_tool_definitions(_structured(attributes, TOOLS)))

    def _sub_agent(self, span: dict, transcript: _Transcript) -> None:
        child, _ = self._agent(span, {})
        answer = next((s["text"] for s in reversed(child["steps"]) if s["kind"] == "answer"), "")
        if _failed(span) and not answer:
            answer = _error_text(span)
        transcript.tool_execution(
            name=child["agent"]["name"],
            arguments={"input": child["task"]["prompt"]},
            result=answer,
            is_error=_failed(span),
        )

    def _agent_of(self, root: dict | None, inner: list[dict]) -> dict:
        """{name, version}: gen_ai.agent.name, else the model's name, else the service's name."""
        attributes = root["attributes"] if root is not None else {}
        name = attributes.get("gen_ai.agent.name") or attributes.get("gen_ai.request.model")
        if not name:
            name = next(
                (
                    s["attributes"].get("gen_ai.request.model")
                    for s in inner
                    if _operation(s) in MODEL_OPERATIONS and s["attributes"].get("gen_ai.request.model")
                ),
                None,
            )
        head = root if root is not None else self.order[0]
        name = name or head["resource"].get("service.name") or "unknown"
        agent = {"name": str(name)[:200]}
        if attributes.get("gen_ai.agent.version") not in (None, ""):
            agent["version"] = str(attributes["gen_ai.agent.version"])[:100]
        return agent

    def _metadata(self, root: dict | None, head: dict) -> dict:
        attributes = (
            root["attributes"]
            if root is not None
            else next((s["attributes"] for s in self.order if _operation(s) in MODEL_OPERATIONS), {})
        )
        metadata: dict[str, Any] = {
            "source_format": NAME,
            "trace_id": head["trace_id"],
            "root_span_id": head["span_id"],
        }
        for key, name in (
            ("gen_ai.agent.id", "agent_id"),
            ("gen_ai.conversation.id", "conversation_id"),
            ("gen_ai.provider.name", "provider"),
            ("gen_ai.system", "provider"),
        ):
            if isinstance(attributes.get(key), str) and name not in metadata:
                metadata[name] = attributes[key]
        if root is not None:
            parent = self._parent_agent(root)
            if parent is not None:
                metadata["parent_agent_span_id"] = parent["span_id"]
            if _failed(root):
                metadata["error"] = _error_text(root)
        return metadata

    def _parent_agent(self, span: dict) -> dict | None:
        parent = self.by_id.get(span["parent_id"])
        while parent is not None and _operation(parent) != AGENT:
            parent = self.by_id.get(parent["parent_id"])
        return parent

    # Model calls and tools ----------------------------------------------------------------

    def _model(self, span: dict, transcript: _Transcript) -> None:
        attributes = span["attributes"]
        details = [e["attributes"] for e in span["events"] if e["name"] == DETAILS_EVENT]
        sources = [attributes, *details]
        system, inputs, outputs, tools = (_first(sources, key) for key in (SYSTEM, INPUT, OUTPUT, TOOLS))
        legacy = self._events(span, transcript)
        if inputs is None and outputs is None and system is None:
            if not legacy[0] and not legacy[1]:
                raise TrajectoryFormatError(
                    f"the model call has no captured messages ({INPUT}, {OUTPUT} or message events): content "
                    f"capture is off; trace with {CAPTURE_SETTING}=true to import it"
                )
            inputs, outputs = legacy
        else:
            inputs = _messages(inputs, INPUT, transcript.drop_part) if inputs is not None else []
            outputs = _messages(outputs, OUTPUT, transcript.drop_part) if outputs is not None else []
        if tools is not None:
            transcript.declare_tools(_tool_definitions(tools))
        if system is not None:
            transcript.system(_parts_text(system, SYSTEM, transcript.drop_part))
        transcript.model_input(inputs)
        transcript.model_output(outputs)
        transcript.requested.update(
            call.id for message in (*inputs, *outputs) for call in message.calls if call.id is not None
        )

    def _events(self, span: dict, transcript: _Transcript) -> tuple[list[Message], list[Message]]:
        """The deprecated message events of a span as (input, output) messages; other events checked."""
        inputs, outputs = [], []
        for j, event in enumerate(span["events"]):
            name = event["name"]
            where = f"events[{j}] {name!r}"
            if name in MESSAGE_EVENTS:
                inputs.append(_event_message(MESSAGE_EVENTS[name], _event_body(event, where), where))
            elif name == CHOICE_EVENT:
                body = _event_body(event, where)
                message = body.get("message") or {}
                if not isinstance(message, dict):
                    raise TrajectoryFormatError(f"{where}: message: expected an object")
                if "tool_calls" in body and "tool_calls" not in message:
                    message = {**message, "tool_calls": body["tool_calls"]}
                outputs.append(_event_message("assistant", message, where))
            elif name == "gen_ai.evaluation.result":
                transcript.drop("evaluation_event")
            elif name.startswith("gen_ai.") and name not in KNOWN_EVENTS:
                raise TrajectoryFormatError(f"{where}: unknown GenAI event, cannot be imported")
        return inputs, outputs

    def _tool(self, span: dict, transcript: _Transcript) -> None:
        attributes = span["attributes"]
        self._events(span, transcript)
        name = attributes.get("gen_ai.tool.name")
        if not isinstance(name, str) or not name:
            raise TrajectoryFormatError("gen_ai.tool.name is missing")
        call_id = attributes.get("gen_ai.tool.call.id")
        if call_id is not None and not isinstance(call_id, str):
            raise TrajectoryFormatError("gen_ai.tool.call.id: expected a string")
        is_error = _failed(span)
        if _has(attributes, "gen_ai.tool.call.result"):
            result = text_of(_raw(attributes, "gen_ai.tool.call.result"))
        elif is_error:
            result = _error_text(span)
        elif call_id in transcript.requested:
            return  # result not captured: the next model call's input holds it, tied by call id
        else:
            result = ""
        arguments = _raw(attributes, "gen_ai.tool.call.arguments")
        transcript.tool_execution(
            name=name, arguments=arguments, result=result, call_id=call_id or None, is_error=is_error
        )


# Attribute values -------------------------------------------------------------------------


def _legacy(key: str) -> bool:
    """`gen_ai.prompt`, `gen_ai.completion` and their `gen_ai.prompt.0.content` keys (not `gen_ai.prompt.name`)."""
    parts = key.split(".")
    return parts[:2] in (["gen_ai", "prompt"], ["gen_ai", "completion"]) and (len(parts) == 2 or ascii_digits(parts[2]))


def _operation(span: dict) -> Any:
    return span["attributes"].get(OPERATION)


def _failed(span: dict) -> bool:
    return span["status"].get("code") == "ERROR" or span["attributes"].get("error.type") not in (None, "")


def _error_text(span: dict) -> str:
    """What went wrong: the status message, else the exception event's message, else error.type."""
    if span["status"].get("message"):
        return span["status"]["message"]
    for event in span["events"]:
        if event["name"] == "exception" and event["attributes"].get("exception.message"):
            return str(event["attributes"]["exception.message"])
    return str(span["attributes"].get("error.type") or "error")


def _has(attributes: dict, key: str) -> bool:
    prefix = key + "."
    return key in attributes or any(k.startswith(prefix) for k in attributes)


def _raw(attributes: dict, key: str) -> Any:
    """An attribute as recorded: a plain value, or (a span-per-line export) rebuilt from dotted keys."""
    if key in attributes:
        return attributes[key]
    prefix = key + "."
    flat = {k[len(prefix) :]: v for k, v in attributes.items() if k.startswith(prefix)}
    return _unflatten(flat) if flat else None


def _structured(attributes: dict, key: str) -> Any:
    """A structured attribute: recorded as a JSON string on spans, or as a structured value."""
    value = _raw(attributes, key)
    if isinstance(value, str):
        try:
            return nested_json(value, key)
        except NotJson:
            raise TrajectoryFormatError(f"{key}: not valid JSON") from None
    return value


def _first(sources: list[dict], key: str) -> Any:
    for attributes in sources:
        if _has(attributes, key):
            return _structured(attributes, key)
    return None


def _unflatten(flat: dict[str, Any]) -> Any:
    """Dotted keys back into objects; objects keyed 0..n-1 back into lists (`spans.flatten` undone)."""
    tree: dict = {}
    for key, value in flat.items():
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise TrajectoryFormatError(f"attribute key {key[:60]!r} clashes with another")
        node[parts[-1]] = value

    def listify(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        items = {k: listify(v) for k, v in node.items()}
        if items and sorted(items) == sorted(map(str, range(len(items)))):
            return [items[str(i)] for i in range(len(items))]
        return items

    return listify(tree)


# Messages (the v1.41.0 JSON schemas) -------------------------------------------------------


def _messages(raw: Any, where: str, drop) -> list[Message]:
    """gen_ai.input.messages / gen_ai.output.messages as Transcript messages. A tool call
    response part is a tool message of its own (whatever the role of the message holding it)."""
    if not isinstance(raw, list):
        raise TrajectoryFormatError(f"{where}: expected a list of messages")
    out = []
    for i, message in enumerate(raw):
        mwhere = f"{where}[{i}]"
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise TrajectoryFormatError(f"{mwhere}: expected a message {{role, parts}}")
        parts = message.get("parts")
        if not isinstance(parts, list):
            raise TrajectoryFormatError(f"{mwhere}.parts: expected a list of parts")
        texts, reasoning, calls, responses = [], [], [], []
        for j, part in enumerate(parts):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and type(part.get("content")) is str:  # the common case, no `where` built
                texts.append(part["content"])
                continue
            pwhere = f"{mwhere}.parts[{j}]"
            if kind == "text":
                texts.append(_string(part, "content", pwhere))
            elif kind == "reasoning":
                reasoning.append(_string(part, "content", pwhere))
            elif kind == "tool_call":
                calls.append(
                    ToolCall(
                        name=_string(part, "name", pwhere),
                        arguments=part.get("arguments"),
                        id=_optional_id(part, pwhere),
                    )
                )
            elif kind == "tool_call_response":
                if "response" not in part and "result" not in part:
                    raise TrajectoryFormatError(f"{pwhere}: a tool_call_response needs its response")
                response = part["response"] if "response" in part else part["result"]  # the spec's example says result
                responses.append(Message(role="tool", text=text_of(response), call_id=_optional_id(part, pwhere)))
            elif kind in DROPPED_PARTS:
                drop(f"{kind}_part", part)
            else:
                raise TrajectoryFormatError(
                    f"{pwhere}: part type {str(kind)[:40]!r} cannot be imported (read: text, reasoning, tool_call, "
                    f"tool_call_response; dropped: {', '.join(DROPPED_PARTS)})"
                )
        if texts or reasoning or calls or not responses:
            out.append(
                Message(role=message["role"], text="\n".join(texts), reasoning="\n".join(reasoning), calls=calls)
            )
        out.extend(responses)
    return out


def _parts_text(raw: Any, where: str, drop) -> str:
    """gen_ai.system_instructions: a list of parts, of which the text is kept."""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, list):
        raise TrajectoryFormatError(f"{where}: expected a list of parts")
    texts = []
    for j, part in enumerate(raw):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(_string(part, "content", f"{where}[{j}]"))
        elif kind in DROPPED_PARTS:
            drop(f"{kind}_part", part)
        else:
            raise TrajectoryFormatError(f"{where}[{j}]: part type {str(kind)[:40]!r} cannot be imported (read: text)")
    return "\n".join(texts)


def _tool_definitions(raw: Any) -> list:
    if not isinstance(raw, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in raw):
        raise TrajectoryFormatError(f"{TOOLS}: expected a list of tool definitions {{type, name, ...}}")
    return raw


def _string(part: dict, key: str, where: str) -> str:
    if not isinstance(part.get(key), str):
        raise TrajectoryFormatError(f"{where}.{key}: expected a string")
    return part[key]


def _optional_id(part: dict, where: str) -> str | None:
    value = part.get("id")
    if value is not None and not isinstance(value, str):
        raise TrajectoryFormatError(f"{where}.id: expected a string")
    return value.strip() or None if value is not None else None


# The deprecated message events (semantic conventions before v1.37.0) ----------------------


def _event_body(event: dict, where: str) -> dict:
    """An event's body: the JSON in `gen_ai.event.content` (Azure, Semantic Kernel), else its
    attributes taken as the body's fields."""
    attributes = event["attributes"]
    if "gen_ai.event.content" in attributes:
        body = _structured(attributes, "gen_ai.event.content")
    else:
        body = _unflatten({k: v for k, v in attributes.items() if not k.startswith("gen_ai.")})
    if not isinstance(body, dict):
        raise TrajectoryFormatError(f"{where}: expected the event body as an object")
    return body


def _event_message(role: str, body: dict, where: str) -> Message:
    """One message event's body ({content, role, tool_calls, id}) as a Transcript message."""
    content = body.get("content")
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text", part.get("content")), str)
            ):
                kind = part.get("type") if isinstance(part, dict) else None
                raise TrajectoryFormatError(
                    f"{where}: content[{j}]: part type {str(kind)[:40]!r} cannot be imported (read: text)"
                )
            texts.append(part.get("text", part.get("content")))
        content = "\n".join(texts)
    elif content is not None and not isinstance(content, str):
        content = text_of(content)
    calls = []
    if not isinstance(body.get("tool_calls") or [], list):
        raise TrajectoryFormatError(f"{where}: tool_calls: expected a list")
    for j, call in enumerate(body.get("tool_calls") or []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise TrajectoryFormatError(
                f"{where}: tool_calls[{j}]: expected {{id, type, function: {{name, arguments}}}}"
            )
        calls.append(
            ToolCall(
                name=function["name"],
                arguments=arguments_of(function.get("arguments")),
                id=call.get("id") if isinstance(call.get("id"), str) else None,
            )
        )
    call_id = body.get("id") if role == "tool" else None
    if call_id is not None and not isinstance(call_id, str):
        raise TrajectoryFormatError(f"{where}: id: expected a string")
    return Message(role=role, text=content or "", calls=calls, call_id=call_id)
