"""OpenInference spans (Arize Phoenix, Arize AX) as canonical v1 trajectories.

Plain Python, no Django. Implements the OpenInference semantic conventions as published in
Arize-ai/openinference (`spec/semantic_conventions.md`, `spec/llm_spans.md`,
`spec/tool_calling.md`, `spec/multimodal_attributes.md`) and in the Python package
`openinference-semantic-conventions` 0.1.32 (`openinference.semconv.trace`).

Input, one JSON object per line (`records`):
- OTLP JSON (`{"resourceSpans": [...]}`), or one span per line (`{"name", "context":
  {"trace_id", "span_id"}, "parent_id", "start_time", "attributes", "status", ...}`, the
  console exporter's and Phoenix's span JSON), with attributes flat (dotted keys) or nested;
  both read by `spans.span_records`. Phoenix's `span_kind` beside the attributes is the kind.
- a row of Phoenix's spans dataframe written with `to_json(orient="records", lines=True)`:
  columns `context.trace_id`, `context.span_id`, `parent_id`, `name`, `span_kind`,
  `start_time`, `end_time` (ISO 8601, or integers in milliseconds: pandas' default),
  `status_code`, `status_message`, `events`, and `attributes.<key>` with list-of-object
  values (`attributes.llm.input_messages`: `[{"message.role": ..., "message.content": ...}]`).
  It is turned into a span JSON object first, so all three read the same.
Records are filed by trace id. A trace with no span carrying `openinference.span.kind`
is not OpenInference (`claims`) and converts to nothing.

One trajectory per AGENT span (an agent run), in execution order; a trace without AGENT
spans gives one trajectory per root span (a LangChain or LlamaIndex app's CHAIN root, or a
lone LLM call). Inside a run, spans are walked in execution order (`spans.execution_order`):
- LLM: `llm.input_messages.N.message.*` -> `Transcript.model_input`, and
  `llm.output_messages.N.message.*` -> `model_output`. A message is `message.role`
  (developer -> system, human -> user, ai/model -> assistant, function -> tool),
  `message.content`, or `message.contents.M.message_content.*` (type `text` read,
  `reasoning` a thought, `tool_use` a call when `message.tool_calls` is absent, `image` and
  `audio` dropped and counted), `message.tool_calls.K.tool_call.{id, function.name,
  function.arguments}` (also the older `message.function_call_name` /
  `message.function_call_arguments_json`), `message.tool_call_id` and `message.name` (a
  tool result). A span without output messages and a plain-text `output.value` has that
  text as its output; a JSON `output.value` alone is refused (the output cannot be read).
  `llm.prompts.N.prompt.text` / `llm.choices.N.completion.text` (completions API) are read
  as user / assistant text. `llm.tools.N.tool.json_schema` -> `declare_tools`.
- TOOL: `Transcript.tool_execution`: `tool.name` (else the span name), `input.value` as the
  arguments, `output.value` as the result, `tool.id` (else `tool_call.id`) as the call id;
  status ERROR -> `is_error`, the result then `output.value`, else the status message, else
  the `exception` event's message.
- RETRIEVER: an action (tool = the span name, else "retriever", arguments `{"query":
  input.value}`) and its observation listing `retrieval.documents.N.document.{id, score,
  content}`, one document per paragraph. `document.metadata` is dropped (counted).
- AGENT nested in the run: its own trajectory, and here an action (tool = its `agent.name`,
  else its span name; arguments its input) with its output as the observation; its spans add
  no steps to this run. A TOOL span is one action too: spans under it add no steps either.
- EMBEDDING, RERANKER, GUARDRAIL, EVALUATOR: dropped, counted per kind (`embedding_span`,
  ...); so are LLM / TOOL / RETRIEVER spans nested under another such span
  (`nested_llm_span`, ...) and, when the trace has AGENT spans, any such span outside all of
  them (`span_outside_agent`, counted in the trace's first run).
- CHAIN, PROMPT, UNKNOWN (or no kind): structure, walked through; their input and output
  repeat what the spans under them hold.
Task prompt: the run's span `input.value`; JSON (`input.mime_type` application/json, or a
JSON object) is read for `input` / `query` / `question` / `prompt` / the first user message
of `messages`; else the first user message of the first LLM span. The run's `output.value`
(JSON: `output` / `answer` / the last `messages` entry) is the answer when no model output
is. Agent: `agent.name`, else the AGENT span's name, else the first `llm.model_name`, else
resource `service.name` / `openinference.project.name`; version: resource
`service.version`. Metadata: source_format "openinference", trace_id, root_span_id (the
run's span), parent_span_id (a nested run's parent AGENT span), session_id / user_id
(`session.id` / `user.id` of the run's span, else the first span that has them), span
metadata (`metadata`), model names (`llm.model_name`, `llm.provider` / `llm.system`).
"""

from __future__ import annotations

from typing import Any

from annotate.input_records import at
from annotate.trace_formats import spans as span_reader
from annotate.trace_formats.transcript import Message, ToolCall, Transcript, text_of
from annotate.trajectory_formats import NotJson, TrajectoryFormatError, nested_json
from core.ids import ascii_digits

NAME = "openinference"
TITLE = "OpenInference (Phoenix, Arize)"
DROPPED_REASONS = {
    "image": "image part(s) of messages were dropped",
    "audio": "audio part(s) of messages were dropped",
    "redacted_reasoning": "reasoning part(s) with only encrypted or opaque data were dropped",
    "embedding_span": "EMBEDDING span(s) were dropped",
    "reranker_span": "RERANKER span(s) were dropped",
    "guardrail_span": "GUARDRAIL span(s) were dropped",
    "evaluator_span": "EVALUATOR span(s) were dropped",
    "nested_llm_span": "LLM span(s) inside a tool, model or retriever span were dropped (the outer span is kept)",
    "nested_tool_span": "TOOL span(s) inside a tool, model or retriever span were dropped (the outer span is kept)",
    "nested_retriever_span": "RETRIEVER span(s) inside a tool, model or retriever span were dropped (the outer span is kept)",
    "document_metadata": "retrieved documents' metadata were dropped (their id, score and content are kept)",
    "span_outside_agent": "span(s) outside every agent span (invoke_agent, AGENT) were dropped",
}

KIND = "openinference.span.kind"
KINDS = {
    "AGENT",
    "CHAIN",
    "LLM",
    "TOOL",
    "RETRIEVER",
    "EMBEDDING",
    "RERANKER",
    "GUARDRAIL",
    "EVALUATOR",
    "PROMPT",
    "UNKNOWN",
}
STRUCTURAL = {"CHAIN", "PROMPT", "UNKNOWN"}
MAPPED = {"LLM", "TOOL", "RETRIEVER", "AGENT"}
DROPPED_KINDS = {"EMBEDDING", "RERANKER", "GUARDRAIL", "EVALUATOR"}
ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}
JSON_MIME = "application/json"
# Message attributes that are not content: provider signatures kept for replay.
NOT_CONTENT = ("message_content.id", "message_content.signature", "tool_call.reasoning_signature")


# Detection and records --------------------------------------------------------------------


def looks_like(obj: Any) -> bool:
    """An OTLP line, a span per line or a Phoenix dataframe row whose spans carry a kind."""
    if not isinstance(obj, dict):
        return False
    if span_reader.is_otlp(obj):
        return _otlp_has_kind(obj)
    if _is_dataframe_row(obj):
        return "span_kind" in obj or f"attributes.{KIND}" in obj
    if span_reader.is_span_json(obj):
        attributes = obj.get("attributes")
        if "span_kind" in obj:
            return True
        if isinstance(attributes, dict):
            nested = attributes.get("openinference")
            return KIND in attributes or (
                isinstance(nested, dict) and isinstance(nested.get("span"), dict) and "kind" in nested["span"]
            )
    return False


def _otlp_has_kind(obj: dict) -> bool:
    resource_spans = obj.get("resourceSpans", obj.get("resource_spans"))
    for rs in resource_spans if isinstance(resource_spans, list) else []:
        scope_spans = rs.get("scopeSpans", []) if isinstance(rs, dict) else []
        for ss in scope_spans if isinstance(scope_spans, list) else []:
            spans = ss.get("spans", []) if isinstance(ss, dict) else []
            for span in spans if isinstance(spans, list) else []:
                attributes = span.get("attributes") if isinstance(span, dict) else None
                if isinstance(attributes, list) and any(
                    isinstance(a, dict) and a.get("key") == KIND for a in attributes
                ):
                    return True
    return False


def _is_dataframe_row(obj: dict) -> bool:
    return "context.trace_id" in obj and "context.span_id" in obj


def records(obj: Any):
    """(trace id, span) for each span of one line; a Phoenix dataframe row is read as a span."""
    if isinstance(obj, dict) and _is_dataframe_row(obj):
        obj = _dataframe_row_span(obj)
    return span_reader.span_records(obj)


def _dataframe_row_span(row: dict) -> dict:
    """A row of Phoenix's spans dataframe as a span JSON object (times in ms become ns)."""
    attributes = {
        key.removeprefix("attributes."): value
        for key, value in row.items()
        if key.startswith("attributes.") and value is not None
    }
    span = {
        "name": row.get("name", ""),
        "context": {"trace_id": row["context.trace_id"], "span_id": row["context.span_id"]},
        "parent_id": row.get("parent_id"),
        "start_time": _milliseconds(row.get("start_time")),
        "end_time": _milliseconds(row.get("end_time")),
        "status_code": row.get("status_code"),
        "status_message": row.get("status_message"),
        "events": row.get("events") or [],
        "attributes": attributes,
    }
    if row.get("span_kind") is not None:
        span["span_kind"] = row["span_kind"]
    return span


def _milliseconds(value: Any) -> Any:
    """pandas writes datetimes as epoch milliseconds unless told `date_format="iso"`."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value * 1_000_000
    return value


def claims(spans: list[dict]) -> bool:
    """Whether a trace's spans (as `spans.span_records` gives them) are OpenInference spans."""
    return any(isinstance(s, dict) and KIND in (s.get("attributes") or {}) for s in spans)


# Converting one trace ---------------------------------------------------------------------


def convert(records: list[tuple[int, Any]]) -> list[tuple[dict, dict[str, int]]]:
    """One trace's spans as canonical objects, one per agent run (see the module docstring)."""
    trace = _Trace(records)
    if not claims(trace.spans):
        return []
    agents = [s for s in trace.order if trace.kind(s) == "AGENT"]
    roots = agents or [s for s in trace.order if s["parent_id"] not in trace.by_id]
    outside = trace.outside_agents() if agents else 0
    out = []
    for i, root in enumerate(roots):
        out.append(_run(trace, root, outside if i == 0 else 0))
    return out


class _Trace:
    """One trace's spans, checked, in execution order, with their lines for error messages."""

    def __init__(self, records: list[tuple[int, Any]]) -> None:
        self.line: dict[str, int] = {}
        self.spans: list[dict] = []
        for line, span in records:
            _check_span(span, line)
            self.line.setdefault(span["span_id"], line)
            span = dict(span, attributes=span_reader.flatten(span["attributes"], f"{at(line)}: attributes"))
            self.spans.append(span)
        self.order = span_reader.execution_order(self.spans)
        self.by_id = {s["span_id"]: s for s in self.spans}
        self._kinds = {s["span_id"]: self._read_kind(s) for s in self.spans}

    def where(self, span: dict) -> str:
        return f"span {span['name'][:80]!r} ({at(self.line[span['span_id']])})"

    def kind(self, span: dict) -> str:
        return self._kinds[span["span_id"]]

    def _read_kind(self, span: dict) -> str:
        kind = span["attributes"].get(KIND, "UNKNOWN")
        if not isinstance(kind, str):
            raise TrajectoryFormatError(f"{self.where(span)}: {KIND} is not a string")
        if kind.upper() not in KINDS:
            raise TrajectoryFormatError(
                f"{self.where(span)}: unknown {KIND} {kind[:40]!r} (expected one of {', '.join(sorted(KINDS))})"
            )
        return kind.upper()

    def outside_agents(self) -> int:
        """Content spans that no AGENT span holds (an app's own LLM call before its agent)."""
        count, inside = 0, set()
        for span in self.order:
            if self.kind(span) == "AGENT" or span["parent_id"] in inside:
                inside.add(span["span_id"])
            elif self.kind(span) not in STRUCTURAL:
                count += 1
        return count


def _check_span(span: Any, line: int) -> None:
    if not isinstance(span, dict):
        raise TrajectoryFormatError(f"{at(line)}: expected a span object, got {type(span).__name__}")
    for key in ("trace_id", "span_id", "name"):
        if not isinstance(span.get(key), str):
            raise TrajectoryFormatError(f"{at(line)}: the span has no {key}")
    if not isinstance(span.get("attributes"), dict) or not isinstance(span.get("status"), dict):
        raise TrajectoryFormatError(f"{at(line)}: the span's attributes or status are not objects")


def _run(trace: _Trace, root: dict, outside: int) -> tuple[dict, dict[str, int]]:
    """One agent run (or one root span's subtree) through a Transcript."""
    t = Transcript()
    if outside:
        t.drop("span_outside_agent", outside)
    attributes = root["attributes"]
    prompt = _input_text(attributes.get("input.value"), attributes.get("input.mime_type"), trace.where(root))
    if prompt:
        t.user(prompt)
    walked = [root] if trace.kind(root) != "AGENT" else []
    _walk(trace, walked + span_reader.descendants(root, trace.order), t, root)
    final = _output_text(attributes.get("output.value"), attributes.get("output.mime_type"))
    try:
        return t.canonical(agent=_agent(trace, root), final_output=final or None, metadata=_metadata(trace, root))
    except TrajectoryFormatError as exc:
        raise TrajectoryFormatError(f"{trace.where(root)}: {exc}") from None


def _walk(trace: _Trace, spans: list[dict], t: Transcript, root: dict) -> None:
    """The run's spans in order; a mapped span's subtree adds nothing more (counted if content)."""
    seen = {"inputs": 0}  # input messages read so far: what a model call repeats is not counted twice
    closed: set[str] = set()  # spans whose subtree adds no steps here
    elsewhere: set[str] = set()  # spans that belong to a nested agent's own run
    for span in spans:
        kind, parent = trace.kind(span), span["parent_id"]
        if parent in elsewhere:
            elsewhere.add(span["span_id"])
            continue
        if parent in closed:
            closed.add(span["span_id"])
            if kind == "AGENT":
                elsewhere.add(span["span_id"])
            elif kind in DROPPED_KINDS:
                t.drop(f"{kind.lower()}_span")
            elif kind in MAPPED:
                t.drop(f"nested_{kind.lower()}_span")
            continue
        if kind in DROPPED_KINDS:
            t.drop(f"{kind.lower()}_span")
            closed.add(span["span_id"])
        elif kind == "LLM":
            _llm(trace, span, t, seen)
            closed.add(span["span_id"])
        elif kind == "TOOL":
            _tool(trace, span, t)
            closed.add(span["span_id"])
        elif kind == "RETRIEVER":
            _retriever(trace, span, t)
            closed.add(span["span_id"])
        elif kind == "AGENT" and span is not root:
            _sub_agent(trace, span, t)
            elsewhere.add(span["span_id"])


# LLM spans --------------------------------------------------------------------------------


def _llm(trace: _Trace, span: dict, t: Transcript, seen: dict) -> None:
    """A model call. Every call repeats the conversation so far: an image in a message is
    counted when the message is first seen (its index past the longest input read before)."""
    attributes, where = span["attributes"], trace.where(span)
    lists = _lists(attributes, SPAN_LISTS, where)
    tools = [_json_or_text(tool.get("tool.json_schema")) for tool in lists.get("llm.tools", [])]
    t.declare_tools([tool for tool in tools if tool])
    inputs = _messages(lists, "llm.input_messages", where, t, new_from=seen["inputs"])
    seen["inputs"] = max(seen["inputs"], len(inputs))
    if not inputs:
        inputs = [
            Message(role="user", text=_str(p.get("prompt.text"), f"{where}: llm.prompts"))
            for p in lists.get("llm.prompts", [])
        ]
    if inputs:
        t.model_input(inputs)
    outputs = _messages(lists, "llm.output_messages", where, t)
    if not outputs:
        outputs = [
            Message(role="assistant", text=_str(c.get("completion.text"), f"{where}: llm.choices"))
            for c in lists.get("llm.choices", [])
        ]
    if not outputs and attributes.get("output.value") not in (None, ""):
        if attributes.get("output.mime_type") == JSON_MIME:
            raise TrajectoryFormatError(
                f"{where}: the model's output is only in output.value (JSON), without llm.output_messages; "
                "it cannot be read as messages"
            )
        outputs = [Message(role="assistant", text=text_of(attributes["output.value"]))]
    for message in outputs:
        if message.role != "assistant":
            raise TrajectoryFormatError(f"{where}: an output message with role {message.role!r} (expected assistant)")
    if outputs:
        t.model_output(outputs)


def _messages(lists: dict, prefix: str, where: str, t: Transcript, new_from: int = 0) -> list[Message]:
    """`prefix.N.message.*` (from `_lists`) as Messages; what is dropped is counted for messages
    from `new_from` on."""
    out = []
    for i, item in enumerate(lists.get(prefix, [])):
        drops: list[str] = []
        out.append(_message(item, f"{where}: {prefix}.{i}", drops))
        for kind in drops if i >= new_from else []:
            t.drop(kind)
    return out


def _message(item: dict, where: str, drops: list[str]) -> Message:
    """One flattened message (`message.role`, `message.content`, ...) as a Message."""
    role = item.get("message.role")
    if not isinstance(role, str) or role.lower() not in ROLES:
        raise TrajectoryFormatError(
            f"{where}: message.role {str(role)[:40]!r} cannot be imported (expected system, user, assistant or tool)"
        )
    message = Message(role=ROLES[role.lower()])
    inner = _lists(item, MESSAGE_LISTS, where)  # both of a message's lists in one pass over its keys
    texts, reasoning, content_calls = _contents(inner.get("message.contents", []), where, drops)
    content = item.get("message.content")
    message.text = _str(content, f"{where}.message.content") if content not in (None, "") else "\n".join(texts)
    message.reasoning = "\n".join(reasoning)
    message.calls = [
        _call(call, f"{where}.message.tool_calls.{k}") for k, call in enumerate(inner.get("message.tool_calls", []))
    ] or content_calls
    if item.get("message.function_call_name"):
        message.calls.append(
            ToolCall(
                name=_str(item["message.function_call_name"], where),
                arguments=item.get("message.function_call_arguments_json"),
            )
        )
    message.call_id = _optional_str(item.get("message.tool_call_id"), f"{where}.message.tool_call_id")
    message.name = _optional_str(item.get("message.name"), f"{where}.message.name")
    known = {
        "message.role",
        "message.content",
        "message.tool_call_id",
        "message.name",
        "message.function_call_name",
        "message.function_call_arguments_json",
    }
    for key in item:
        if key not in known and not key.startswith(("message.contents.", "message.tool_calls.")):
            raise TrajectoryFormatError(f"{where}: unknown message attribute {key[:60]!r}")
    return message


def _contents(parts: list[dict], where: str, drops: list[str]) -> tuple[list[str], list[str], list[ToolCall]]:
    """`message.contents`: text parts, reasoning parts, tool_use parts; images and audio dropped."""
    texts, reasoning, calls = [], [], []
    for m, part in enumerate(parts):
        here = f"{where}.message.contents.{m}"
        kind = part.get("message_content.type")
        text = part.get("message_content.text")
        if kind == "text":
            texts.append(_str(text, f"{here}.message_content.text"))
        elif kind == "reasoning":
            if text:
                reasoning.append(_str(text, f"{here}.message_content.text"))
            elif part.get("message_content.data") or part.get("message_content.encrypted_content"):
                drops.append("redacted_reasoning")
        elif kind == "tool_use":
            calls.append(_call(part, here))
        elif kind in ("image", "audio"):
            drops.append(kind)
        else:
            raise TrajectoryFormatError(
                f"{here}: message_content.type {str(kind)[:40]!r} cannot be imported "
                "(read: text, reasoning, tool_use; dropped and counted: image, audio)"
            )
    return texts, reasoning, calls


def _call(item: dict, where: str) -> ToolCall:
    name = item.get("tool_call.function.name")
    if not isinstance(name, str) or not name:
        raise TrajectoryFormatError(f"{where}: tool_call.function.name is missing")
    return ToolCall(
        name=name,
        arguments=item.get("tool_call.function.arguments"),
        id=_optional_str(item.get("tool_call.id"), f"{where}.tool_call.id"),
    )


# TOOL, RETRIEVER and nested AGENT spans ---------------------------------------------------


def _tool(trace: _Trace, span: dict, t: Transcript) -> None:
    attributes, where = span["attributes"], trace.where(span)
    name = attributes.get("tool.name") or span["name"]
    if not isinstance(name, str) or not name:
        raise TrajectoryFormatError(f"{where}: tool.name is missing (and the span has no name)")
    call_id = attributes.get("tool.id", attributes.get("tool_call.id"))
    is_error = span["status"].get("code") == "ERROR"
    t.tool_execution(
        name=name,
        arguments=attributes.get("input.value"),
        result=_result(span, is_error),
        call_id=_optional_str(call_id, f"{where}: tool.id"),
        is_error=is_error,
    )


def _result(span: dict, is_error: bool) -> str:
    """A tool's output; for a failed tool without one, the status or exception message."""
    result = text_of(span["attributes"].get("output.value"))
    if result or not is_error:
        return result
    if span["status"].get("message"):
        return span["status"]["message"]
    for event in span.get("events") or []:
        if event.get("name") == "exception" and isinstance(event.get("attributes"), dict):
            return text_of(event["attributes"].get("exception.message"))
    return ""


def _retriever(trace: _Trace, span: dict, t: Transcript) -> None:
    attributes, where = span["attributes"], trace.where(span)
    documents = []
    for d, doc in enumerate(_items(attributes, "retrieval.documents", where)):
        if any(key.startswith("document.metadata") for key in doc):
            t.drop("document_metadata")
        documents.append(_document(doc, f"{where}: retrieval.documents.{d}"))
    t.tool_execution(
        name=span["name"] or "retriever",
        arguments={"query": text_of(attributes.get("input.value"))},
        result="\n\n".join(documents),
        is_error=span["status"].get("code") == "ERROR",
    )


def _document(doc: dict, where: str) -> str:
    """One retrieved document as text: `[id] (score 0.82) content`."""
    head = []
    if doc.get("document.id") is not None:
        head.append(f"[{text_of(doc['document.id'])}]")
    score = doc.get("document.score")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise TrajectoryFormatError(f"{where}.document.score: expected a number")
        head.append(f"(score {score:g})")
    content = _str(doc.get("document.content", ""), f"{where}.document.content")
    return " ".join(head + [content]) if content else " ".join(head)


def _sub_agent(trace: _Trace, span: dict, t: Transcript) -> None:
    """A nested agent, seen from its parent: a call to it and what it returned."""
    attributes = span["attributes"]
    is_error = span["status"].get("code") == "ERROR"
    output = _output_text(attributes.get("output.value"), attributes.get("output.mime_type"))
    t.tool_execution(
        name=_agent_name(span) or "agent",
        arguments=attributes.get("input.value"),
        result=output or (_result(span, is_error) if is_error else ""),
        is_error=is_error,
    )


# Inputs, outputs, agent, metadata ---------------------------------------------------------


def _input_text(value: Any, mime: Any, where: str) -> str:
    """The user's input from a run's input.value: plain text, or a common JSON shape."""
    if value is None or value == "":
        return ""
    parsed = _parsed_json(value, mime)
    if parsed is None:
        return text_of(value)
    if isinstance(parsed, dict):
        for key in ("input", "query", "question", "prompt"):
            if isinstance(parsed.get(key), str) and parsed[key].strip():
                return parsed[key]
        messages = parsed.get("messages")
        if isinstance(messages, list):
            for message in messages:
                if _json_role(message) == "user":
                    return _json_message_text(message)
    return ""  # JSON of another shape: the first user message of the first model call is the prompt


def _output_text(value: Any, mime: Any) -> str:
    if value is None or value == "":
        return ""
    parsed = _parsed_json(value, mime)
    if isinstance(parsed, dict):
        for key in ("output", "answer", "content"):
            if isinstance(parsed.get(key), str):
                return parsed[key]
        messages = parsed.get("messages")
        if isinstance(messages, list) and messages and _json_role(messages[-1]) == "assistant":
            return _json_message_text(messages[-1])
    return text_of(value)


def _parsed_json(value: Any, mime: Any) -> Any:
    """input.value / output.value decoded when it is JSON (its mime type says so, or, without
    one, it is a JSON object)."""
    if not isinstance(value, str):
        return value if isinstance(value, (dict, list)) else None
    if mime != JSON_MIME and (mime is not None or not value.lstrip().startswith("{")):
        return None  # text/plain, or no mime type and not an object: the text as it is
    try:
        return nested_json(value, "input.value / output.value")
    except NotJson:
        return None


def _json_role(message: Any) -> str | None:
    if not isinstance(message, dict):
        return None
    role = message.get("role", message.get("type"))
    return ROLES.get(role.lower()) if isinstance(role, str) else None


def _json_message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return text_of(content)


def _agent_name(span: dict) -> str | None:
    name = span["attributes"].get("agent.name")
    if isinstance(name, str) and name:
        return name[:200]
    return span["name"][:200] if span["name"] and span["attributes"].get(KIND, "").upper() == "AGENT" else None


def _own_spans(trace: _Trace, root: dict) -> list[dict]:
    """The run's span and those under it, less the spans of agents nested in it."""
    out, others = [root], set()
    for span in span_reader.descendants(root, trace.order):
        if trace.kind(span) == "AGENT" or span["parent_id"] in others:
            others.add(span["span_id"])
        else:
            out.append(span)
    return out


def _agent(trace: _Trace, root: dict) -> dict:
    run = _own_spans(trace, root)
    name = (
        _agent_name(root)
        or _first(run, "llm.model_name")
        or _resource(root, "service.name")
        or _resource(root, "openinference.project.name")
    )
    if not name:
        raise TrajectoryFormatError(
            f"{trace.where(root)}: no agent name (agent.name, an AGENT span's name, llm.model_name or service.name)"
        )
    agent = {"name": name[:200]}
    version = _resource(root, "service.version")
    if version:
        agent["version"] = version[:100]
    return agent


def _first(spans: list[dict], key: str) -> str | None:
    for span in spans:
        value = span["attributes"].get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _resource(span: dict, key: str) -> str | None:
    value = (span.get("resource") or {}).get(key)
    return value if isinstance(value, str) and value else None


def _metadata(trace: _Trace, root: dict) -> dict:
    run = _own_spans(trace, root)
    metadata: dict[str, Any] = {"source_format": NAME, "trace_id": root["trace_id"], "root_span_id": root["span_id"]}
    parent = _parent_agent(trace, root)
    if parent is not None:
        metadata["parent_span_id"] = parent["span_id"]
    for key, attribute in (("session_id", "session.id"), ("user_id", "user.id")):
        value = root["attributes"].get(attribute) or _first(run, attribute)
        if value:
            metadata[key] = text_of(value)
    span_metadata = _span_metadata(root["attributes"])
    if span_metadata:
        metadata["span_metadata"] = span_metadata
    models = []
    for span in run:
        model = span["attributes"].get("llm.model_name")
        if trace.kind(span) == "LLM" and isinstance(model, str) and model and model not in models:
            models.append(model)
    if models:
        metadata["models"] = models
    provider = _first(run, "llm.provider") or _first(run, "llm.system")
    if provider:
        metadata["provider"] = provider
    return metadata


def _parent_agent(trace: _Trace, span: dict) -> dict | None:
    parent = trace.by_id.get(span["parent_id"])
    while parent is not None:
        if trace.kind(parent) == "AGENT":
            return parent
        parent = trace.by_id.get(parent["parent_id"])
    return None


def _span_metadata(attributes: dict) -> Any:
    """`metadata`: a JSON string by the spec, an object (flattened) in nested exports."""
    if "metadata" in attributes:
        return _json_or_text(attributes["metadata"])
    return {key.removeprefix("metadata."): value for key, value in attributes.items() if key.startswith("metadata.")}


# Flattened lists --------------------------------------------------------------------------


def _items(attributes: dict, prefix: str, where: str) -> list[dict]:
    """`prefix.N.rest` keys as a list of `{rest: value}`, by N (`llm.input_messages.0.message.role`)."""
    return _lists(attributes, (prefix,), where).get(prefix, [])


SPAN_LISTS = (
    "llm.input_messages",
    "llm.output_messages",
    "llm.tools",
    "llm.prompts",
    "llm.choices",
    "retrieval.documents",
)


MESSAGE_LISTS = ("message.contents", "message.tool_calls")


def _lists(attributes: dict, prefixes: tuple[str, ...], where: str) -> dict[str, list[dict]]:
    """Each prefix's `prefix.N.rest` keys as a list of `{rest: value}`, by N, in one pass over
    the attributes (an LLM span holds hundreds: every message of the history, flattened).
    Every prefix has two dotted parts (`llm.input_messages`, `message.contents`)."""
    found: dict[str, dict[int, dict]] = {}
    for key, value in attributes.items():
        end = key.find(".", key.find(".") + 1)  # every list prefix has two parts: `llm.tools`
        if end < 0 or key[:end] not in prefixes:
            continue
        prefix = key[:end]
        index, _, rest = key[end + 1 :].partition(".")
        if not ascii_digits(index) or not rest:
            raise TrajectoryFormatError(f"{where}: attribute {key[:80]!r} has no index after {prefix!r}")
        if rest.endswith(NOT_CONTENT) or value is None:
            continue
        found.setdefault(prefix, {}).setdefault(int(index), {})[rest] = value
    return {prefix: [by_index[i] for i in sorted(by_index)] for prefix, by_index in found.items()}


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise TrajectoryFormatError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _optional_str(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _str(value, where)


def _json_or_text(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return nested_json(value, "a JSON attribute")
        except NotJson:
            return value
    return value
