"""OpenTelemetry GenAI spans: records filed by trace, converted, and checked as canonical v1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotate.trace_formats import otel_genai
from annotate.trajectory_formats import TrajectoryFormatError
from tests.annotate.trace_formats import pipeline

FIXTURES = Path(__file__).parent / "fixtures" / "otel"
TRACE_A = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACE_B = "0af7651916cd43dd8448eb211c80319c"
TRACE_C = "5b8aa5a2d2c872e8321cf37308d69df2"
TRACE_D = "6e0c63257de34c92bf9efcd03927272e"


def import_lines(lines: list[str]) -> dict[str, list]:
    return pipeline.import_by_trace(otel_genai, lines)


def import_file(name: str) -> dict[str, list]:
    return import_lines((FIXTURES / name).read_text().splitlines())


# The main fixture: three traces interleaved in one OTLP file, spans out of order ----------------


def test_traces_are_filed_apart_in_order_of_first_appearance():
    result = import_file("agents.otlp.jsonl")
    assert list(result) == [TRACE_A, TRACE_B, TRACE_C]
    assert [obj["agent"]["name"] for obj, _ in result[TRACE_B]] == ["research-assistant", "archive-searcher"]


def test_parallel_calls_failed_tool_and_retry():
    [(obj, dropped)] = import_file("agents.otlp.jsonl")[TRACE_A]
    assert obj["task"] == {"prompt": "What's the weather in Paris and Rome, and should I pack an umbrella?"}
    assert obj["agent"] == {"name": "travel-planner", "version": "2.1.0"}
    assert obj["steps"] == [
        {"kind": "thought", "text": "I'll check both cities at once."},
        {"kind": "action", "tool": "get_weather", "arguments": {"city": "Paris"}, "call_id": "call_p1"},
        {"kind": "action", "tool": "get_weather", "arguments": {"city": "Rome"}, "call_id": "call_r1"},
        {"kind": "observation", "tool": "get_weather", "content": "rainy, 57°F", "call_id": "call_p1"},
        {
            "kind": "observation",
            "tool": "get_weather",
            "content": "weather service timed out after 5s",
            "call_id": "call_r1",
            "is_error": True,
        },
        {"kind": "action", "tool": "get_weather", "arguments": {"city": "Rome"}, "call_id": "call_r2"},
        {
            "kind": "observation",
            "tool": "get_weather",
            "content": '{"conditions": "sunny", "high_f": 75}',
            "call_id": "call_r2",
        },
        {"kind": "answer", "text": "Paris is rainy (57°F), Rome is sunny (75°F): pack an umbrella for Paris."},
    ]
    metadata = obj["metadata"]
    assert metadata["source_format"] == "otel"
    assert metadata["trace_id"] == TRACE_A
    assert metadata["root_span_id"] == "a000000000000001"
    assert metadata["agent_id"] == "asst_travel_42"
    assert metadata["conversation_id"] == "conv_8812"
    assert metadata["provider"] == "openai"
    assert metadata["system_prompt"] == "You are a travel planner. Use get_weather for forecasts."
    assert [tool["name"] for tool in metadata["tools"]] == ["get_weather"]
    assert "agent_output" not in metadata  # the agent's output is the last model output
    assert dropped == {}


def test_nested_agent_is_a_call_in_its_parent_and_a_trajectory_of_its_own():
    (parent, parent_dropped), (child, child_dropped) = import_file("agents.otlp.jsonl")[TRACE_B]
    assert parent["task"]["prompt"] == "Who founded the Drevholm observatory?"
    assert parent["agent"] == {"name": "research-assistant"}
    assert parent["steps"] == [
        {"kind": "thought", "text": "The archive agent has the founding records; delegate."},
        {
            "kind": "action",
            "tool": "archive-searcher",
            "arguments": {"question": "Drevholm observatory founder"},
            "call_id": "toolu_01",
        },
        {
            "kind": "observation",
            "tool": "archive-searcher",
            "content": "Founded in 1871 by Tamsin Quell.",
            "call_id": "toolu_01",
        },
        {"kind": "thought", "text": "Tamsin Quell founded it in 1871."},
        {"kind": "observation", "tool": "user", "content": "Where was she born?"},  # the second user turn
        {"kind": "answer", "text": "She was born in Karsvik."},
    ]
    assert parent["metadata"]["system_prompt"] == "Answer from the archives only."
    assert child["task"]["prompt"] == "Drevholm observatory founder"
    assert child["agent"] == {"name": "archive-searcher", "version": "0.4"}
    assert child["steps"] == [
        {
            "kind": "action",
            "tool": "search",
            "arguments": {"query": "Drevholm observatory founded"},
            "call_id": "call_s1",
        },
        {
            "kind": "observation",
            "tool": "search",
            "call_id": "call_s1",
            "content": "[0] Drevholm Observatory was founded in 1871 by Tamsin Quell. [1] Quell was born in Karsvik.",
        },
        {"kind": "answer", "text": "Founded in 1871 by Tamsin Quell."},
    ]
    assert child["metadata"]["root_span_id"] == "b000000000000003"
    assert child["metadata"]["parent_agent_span_id"] == "b000000000000001"
    assert parent_dropped == child_dropped == {}


def test_trace_without_agent_span_is_one_trajectory_with_drops_counted():
    [(obj, dropped)] = import_file("agents.otlp.jsonl")[TRACE_C]
    assert obj["task"]["prompt"] == "Describe this chart in one sentence."
    assert obj["agent"] == {"name": "gpt-4o-mini"}  # no agent name: the model's
    assert obj["steps"] == [{"kind": "answer", "text": "Sales doubled between March and May."}]
    assert dropped == {"embeddings_span": 1, "blob_part": 1}
    assert obj["metadata"]["dropped"] == dropped
    assert obj["metadata"]["root_span_id"] == "c000000000000001"


def test_span_order_in_the_file_does_not_matter():
    lines = (FIXTURES / "agents.otlp.jsonl").read_text().splitlines()
    reversed_lines = []
    for line in reversed(lines):
        obj = json.loads(line)
        for resource in obj["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                scope["spans"].reverse()
        reversed_lines.append(json.dumps(obj))
    forward, backward = import_lines(lines), import_lines(reversed_lines)
    for trace in (TRACE_A, TRACE_B, TRACE_C):
        assert [obj["steps"] for obj, _ in backward[trace]] == [obj["steps"] for obj, _ in forward[trace]]


# The deprecated event form, one span per line ----------------------------------------------------


def test_deprecated_message_events_in_span_per_line_export():
    [(obj, dropped)] = import_file("deprecated_events.spans.jsonl")[TRACE_D]
    assert obj["task"]["prompt"] == "Is it freezing in Oslo?"
    assert obj["agent"] == {"name": "gpt-4o"}
    assert obj["steps"] == [
        {
            "kind": "action",
            "tool": "get_weather",
            "arguments": {"city": "Oslo", "units": "celsius"},
            "call_id": "call_o1",
        },
        {"kind": "observation", "tool": "get_weather", "content": "-3°C, light snow", "call_id": "call_o1"},
        {"kind": "answer", "text": "Yes: -3°C with light snow."},
    ]
    assert obj["metadata"]["system_prompt"] == "You are a terse weather bot."
    assert obj["metadata"]["provider"] == "openai"  # from the deprecated gen_ai.system
    assert dropped == {}


# Spans built here, one per line, for the cases the fixtures do not hold ------------------------


def span(
    span_id: str,
    parent: str | None,
    name: str,
    start: int,
    attributes: dict,
    status: str = "UNSET",
    description: str = "",
) -> str:
    return json.dumps(
        {
            "name": name,
            "context": {"trace_id": "0x" + "ab" * 16, "span_id": span_id},
            "parent_id": parent,
            "start_time": f"2025-11-24T10:00:{start:02d}Z",
            "end_time": f"2025-11-24T10:00:{start:02d}.5Z",
            "attributes": attributes,
            "status": {"status_code": status, "description": description},
            "events": [],
            "resource": {"attributes": {"service.name": "desk"}},
        }
    )


def chat(span_id: str, parent: str, start: int, inputs: list, outputs: list) -> str:
    return span(
        span_id,
        parent,
        "chat gpt-4o",
        start,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps(inputs),
            "gen_ai.output.messages": json.dumps(outputs),
        },
    )


USER = {"role": "user", "parts": [{"type": "text", "content": "Summarize the report."}]}
CALL = {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "summarize", "arguments": {"doc": 7}}]}
RESULT = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "Revenue up 4%."}]}
ANSWER = {"role": "assistant", "parts": [{"type": "text", "content": "Revenue rose 4%."}]}
DESK = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "desk"}


def test_agent_run_inside_a_tool_and_model_calls_outside_the_agent():
    lines = [
        chat(
            "01",
            None,
            0,
            [{"role": "user", "parts": [{"type": "text", "content": "classify"}]}],
            [{"role": "assistant", "parts": [{"type": "text", "content": "report"}]}],
        ),
        span("10", None, "invoke_agent desk", 1, DESK),
        chat("11", "10", 2, [USER], [CALL]),
        span(
            "12",
            "10",
            "execute_tool summarize",
            3,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "summarize",
                "gen_ai.tool.call.id": "c1",
                "gen_ai.tool.call.arguments": {"doc": 7},
                "gen_ai.tool.call.result": "Revenue up 4%.",
            },
        ),
        span(
            "13",
            "12",
            "invoke_agent summarizer",
            4,
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "summarizer"},
        ),
        chat(
            "14",
            "13",
            5,
            [{"role": "user", "parts": [{"type": "text", "content": "doc 7"}]}],
            [{"role": "assistant", "parts": [{"type": "text", "content": "Revenue up 4%."}]}],
        ),
        chat(
            "15",
            "12",
            6,
            [{"role": "user", "parts": [{"type": "text", "content": "check"}]}],
            [{"role": "assistant", "parts": [{"type": "text", "content": "ok"}]}],
        ),
        chat("16", "10", 7, [USER, CALL, RESULT], [ANSWER]),
    ]
    [(desk, desk_dropped), (summarizer, summarizer_dropped)] = import_lines(lines)["ab" * 16]
    assert desk["steps"] == [
        {"kind": "action", "tool": "summarize", "arguments": {"doc": 7}, "call_id": "c1"},
        {"kind": "observation", "tool": "summarize", "content": "Revenue up 4%.", "call_id": "c1"},
        {"kind": "answer", "text": "Revenue rose 4%."},
    ]
    # the classifier call before the agent, and the check the tool ran with a model of its own
    assert desk_dropped == {"span_outside_agent": 1, "model_call_inside_tool": 1}
    assert summarizer["steps"] == [{"kind": "answer", "text": "Revenue up 4%."}]
    assert summarizer_dropped == {}


def test_tool_result_not_captured_comes_from_the_next_model_input():
    lines = [
        span("10", None, "invoke_agent desk", 1, DESK),
        chat("11", "10", 2, [USER], [CALL]),
        span(
            "12",
            "10",
            "execute_tool summarize",
            3,
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "summarize", "gen_ai.tool.call.id": "c1"},
        ),
        chat("16", "10", 7, [USER, CALL, RESULT], [ANSWER]),
    ]
    [(obj, _)] = import_lines(lines)["ab" * 16]
    assert obj["steps"][1] == {"kind": "observation", "tool": "summarize", "content": "Revenue up 4%.", "call_id": "c1"}


def test_failed_tool_without_result_reports_the_status_message():
    lines = [
        span("10", None, "invoke_agent desk", 1, DESK),
        chat("11", "10", 2, [USER], [CALL]),
        span(
            "12",
            "10",
            "execute_tool summarize",
            3,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "summarize",
                "gen_ai.tool.call.id": "c1",
                "error.type": "FileNotFoundError",
            },
            status="ERROR",
            description="doc 7 is missing",
        ),
        chat("16", "10", 7, [USER, CALL, RESULT], [ANSWER]),
    ]
    [(obj, _)] = import_lines(lines)["ab" * 16]
    assert obj["steps"][1] == {
        "kind": "observation",
        "tool": "summarize",
        "content": "doc 7 is missing",
        "call_id": "c1",
        "is_error": True,
    }


# Refusals ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, reason",
    [
        (
            "no_content",
            "span 'chat gpt-4o' (line 1): the model call has no captured messages (gen_ai.input.messages, "
            "gen_ai.output.messages or message events): content capture is off; trace with "
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true to import it",
        ),
        ("tool_without_name", "span 'execute_tool' (line 1): gen_ai.tool.name is missing"),
        ("unknown_operation", "span 'rerank docs' (line 1): gen_ai.operation.name 'rerank' cannot be imported"),
        (
            "unknown_part",
            "span 'chat gpt-4o' (line 1): gen_ai.input.messages[0].parts[0]: part type 'video_frame' "
            "cannot be imported",
        ),
        ("invalid_json", "span 'chat gpt-4o' (line 1): gen_ai.input.messages: not valid JSON"),
        (
            "legacy_prompt",
            "span 'chat gpt-4o' (line 1): attribute 'gen_ai.prompt.0.role' is the pre-1.28 (OpenLLMetry) "
            "message form, not read",
        ),
        ("messages_not_list", "span 'chat gpt-4o' (line 1): gen_ai.input.messages: expected a list of messages"),
        ("bad_time", "resourceSpans[0].scopeSpans[0].spans[1].startTimeUnixNano: 'yesterday' is not"),
        ("missing_trace_id", "resourceSpans[0].scopeSpans[0].spans[1].traceId: expected the id as a non-empty string"),
        ("duplicate_span_id", "span id 'f000000000000002' appears twice in trace"),
        ("bad_tool_call_id", "span 'chat gpt-4o' (line 1): gen_ai.output.messages[0].parts[0].id: expected a string"),
        ("unknown_role", "span 'chat gpt-4o' (line 1): message role 'critic' cannot be imported"),
    ],
)
def test_malformed_files_are_refused_with_the_reason(name, reason):
    with pytest.raises(TrajectoryFormatError) as error:
        import_file(f"malformed/{name}.jsonl")
    assert str(error.value).startswith(reason)


def test_trace_without_agent_model_or_tool_span_is_passed_over():
    assert import_lines(
        [
            span("01", None, "GET /health", 0, {"http.route": "/health"}),
            span("02", "01", "embeddings e5", 1, {"gen_ai.operation.name": "embeddings"}),
        ]
    ) == {"ab" * 16: []}


def test_genai_content_without_an_operation_is_refused():
    with pytest.raises(
        TrajectoryFormatError,
        match=r"span 'llm' \(line 1\): carries gen_ai.input.messages but no "
        "gen_ai.operation.name",
    ):
        import_lines([span("01", None, "llm", 0, {"gen_ai.input.messages": json.dumps([USER])})])


# Detection -----------------------------------------------------------------------------------------


def test_looks_like_its_own_lines_only():
    for name in ("agents.otlp.jsonl", "deprecated_events.spans.jsonl"):
        for line in (FIXTURES / name).read_text().splitlines():
            obj = json.loads(line)
            if any(key.startswith("gen_ai.") for _, s in otel_genai.records(obj) for key in s["attributes"]):
                assert otel_genai.looks_like(obj), line[:80]
    assert not otel_genai.looks_like({"schema": "arbiter.trajectory/v1", "task": {"prompt": "x"}, "steps": []})
    assert not otel_genai.looks_like({"messages": [{"role": "user", "content": "hi"}]})
    openinference = {
        "name": "ChatCompletion",
        "context": {"trace_id": "0x01", "span_id": "0x02"},
        "start_time": "2025-11-24T10:00:00Z",
        "attributes": {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o", "gen_ai.system": "openai"},
    }
    assert not otel_genai.looks_like(openinference)
    assert not otel_genai.looks_like(
        {
            "name": "GET /",
            "context": {"trace_id": "0x01", "span_id": "0x02"},
            "start_time": "2025-11-24T10:00:00Z",
            "attributes": {"http.method": "GET"},
        }
    )


def test_claims_genai_traces_not_openinference_ones():
    spans = [
        s
        for line in (FIXTURES / "agents.otlp.jsonl").read_text().splitlines()
        for _, s in otel_genai.records(json.loads(line))
    ]
    assert otel_genai.claims(spans)
    assert not otel_genai.claims(spans + [{"attributes": {"openinference.span.kind": "LLM"}, "events": []}])


def test_a_repeated_image_is_counted_once():
    image = {"type": "uri", "modality": "image", "mime_type": "image/png", "uri": "https://example.test/q3.png"}
    asked = {"role": "user", "parts": [{"type": "text", "content": "Summarize the report."}, image]}
    lines = [
        span("10", None, "invoke_agent desk", 1, DESK),
        chat("11", "10", 2, [asked], [CALL]),
        span(
            "12",
            "10",
            "execute_tool summarize",
            3,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "summarize",
                "gen_ai.tool.call.id": "c1",
                "gen_ai.tool.call.result": "Revenue up 4%.",
            },
        ),
        chat("16", "10", 7, [asked, CALL, RESULT], [ANSWER]),
    ]
    [(obj, dropped)] = import_lines(lines)["ab" * 16]
    assert obj["task"]["prompt"] == "Summarize the report."
    assert dropped == {"uri_part": 1}
