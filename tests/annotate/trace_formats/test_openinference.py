"""OpenInference spans (Phoenix, Arize) imported as canonical trajectories.

Each test reads a fixture file the way the import pipeline does: every line decoded,
split into records by `records()`, the records grouped by trace in file order (and
round-tripped through JSON, as the on-disk grouping does), each trace converted, and every
result checked with `parse_trajectory(..., format="canonical")`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotate.trace_formats import openinference
from annotate.trajectory_formats import TrajectoryFormatError
from tests.annotate.trace_formats import pipeline

FIXTURES = Path(__file__).parent / "fixtures" / "openinference"


def import_lines(lines: list[str]) -> list[tuple[dict, dict]]:
    return pipeline.import_all(openinference, lines)


def import_file(name: str) -> list[tuple[dict, dict]]:
    return import_lines((FIXTURES / name).read_text().splitlines())


ASK = "What's the weather in Paris and Oslo? Then pick the warmer city for a picnic."
TRAVEL_STEPS = [
    {"kind": "thought", "text": "I'll check both cities."},
    {"kind": "action", "tool": "get_weather", "arguments": {"city": "Paris"}, "call_id": "call_paris"},
    {"kind": "action", "tool": "get_weather", "arguments": {"city": "Oslo"}, "call_id": "call_oslo"},
    {
        "kind": "observation",
        "tool": "get_weather",
        "content": '{"temp_c": 21, "sky": "sunny"}',
        "call_id": "call_paris",
    },
    {
        "kind": "observation",
        "tool": "get_weather",
        "content": "weather service timed out",
        "call_id": "call_oslo",
        "is_error": True,
    },
    {"kind": "action", "tool": "picnic_spots", "arguments": {"query": "picnic parks Paris"}},
    {
        "kind": "observation",
        "tool": "picnic_spots",
        "content": "[doc-1] (score 0.91) Parc des Buttes-Chaumont has wide lawns.\n\n"
        "[doc-2] (score 0.55) Jardin du Luxembourg allows picnics on marked lawns.",
    },
    {"kind": "thought", "text": "Oslo failed; ask whether to retry."},
    {"kind": "thought", "text": "Paris is 21°C and sunny; Oslo's forecast timed out. Should I retry Oslo?"},
    {
        "kind": "observation",
        "tool": "user",
        "content": "No need, compare with what you have. And ask the local guide for a spot.",
    },
    {
        "kind": "action",
        "tool": "local_guide",
        "arguments": {"question": "Best picnic spot in Paris?"},
        "call_id": "call_guide",
    },
    {
        "kind": "observation",
        "tool": "local_guide",
        "content": "Try the Parc des Buttes-Chaumont.",
        "call_id": "call_guide",
    },
    {"kind": "answer", "text": "Paris is warmer: have the picnic at the Parc des Buttes-Chaumont."},
]


def test_agent_run_with_parallel_calls_failed_tool_retriever_user_turn_and_sub_agent():
    results = import_file("spans.jsonl")
    assert [obj["metadata"]["root_span_id"] for obj, _ in results] == [
        "a000000000000001",
        "a00000000000000a",
        "b000000000000001",
    ]
    travel, dropped = results[0]
    assert travel["task"] == {"prompt": ASK}
    assert travel["steps"] == TRAVEL_STEPS
    assert travel["agent"] == {"name": "travel_planner", "version": "1.4.0"}
    assert dropped == {"image": 1, "document_metadata": 1, "embedding_span": 1}
    metadata = travel["metadata"]
    assert metadata["system_prompt"] == "You are a travel assistant. Use the tools."
    assert [tool["function"]["name"] for tool in metadata["tools"]] == ["get_weather", "local_guide"]
    assert {
        key: metadata[key]
        for key in (
            "source_format",
            "trace_id",
            "session_id",
            "user_id",
            "span_metadata",
            "models",
            "provider",
            "dropped",
        )
    } == {
        "source_format": "openinference",
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "session_id": "sess-42",
        "user_id": "u-7",
        "span_metadata": {"env": "staging"},
        "models": ["gpt-4o-2024-08-06"],
        "provider": "openai",
        "dropped": {"image": 1, "document_metadata": 1, "embedding_span": 1},
    }
    assert "agent_output" not in metadata  # the agent's output is the last model answer


def test_nested_agent_is_its_own_trajectory_and_adds_nothing_to_the_parent():
    guide, dropped = import_file("spans.jsonl")[1]
    assert guide["task"] == {"prompt": "Best picnic spot in Paris?"}
    assert guide["steps"] == [{"kind": "answer", "text": "Try the Parc des Buttes-Chaumont."}]
    assert guide["agent"]["name"] == "local_guide"
    assert guide["metadata"]["parent_span_id"] == "a000000000000001"
    assert guide["metadata"]["models"] == ["gpt-4o-mini"]
    assert guide["metadata"]["system_prompt"] == "You know the parks of Paris."
    assert dropped == {}


def test_chain_root_without_agent_nested_attributes_and_langchain_roles():
    app, dropped = import_file("spans.jsonl")[2]
    assert app["task"] == {"prompt": "What is 17 * 23?"}  # from {"input": ...} in the root's JSON input
    assert app["steps"] == [
        {"kind": "action", "tool": "multiply", "arguments": {"a": 17, "b": 23}, "call_id": "call_m1"},
        {"kind": "observation", "tool": "multiply", "content": "391", "call_id": "call_m1"},
        {"kind": "answer", "text": "17 * 23 = 391."},
    ]
    assert app["agent"] == {"name": "gpt-4o-mini"}  # no agent name anywhere: the model's
    assert app["metadata"]["span_metadata"] == {"thread": "t-1"}
    assert dropped == {}


def test_otlp_json_with_tool_use_contents_redacted_reasoning_and_guardrail():
    [(obj, dropped)] = import_file("otlp.jsonl")
    assert obj["task"] == {"prompt": "My order 1182 never arrived."}  # from {"messages": [...]}
    assert obj["steps"] == [
        {"kind": "action", "tool": "reship_order", "arguments": {"order_id": 1182}, "call_id": "toolu_01"},
        {"kind": "observation", "tool": "reship_order", "content": "reshipped", "call_id": "toolu_01"},
        {"kind": "answer", "text": "I've reshipped order 1182."},
    ]
    assert obj["agent"] == {"name": "support_agent", "version": "2.1.0"}
    assert dropped == {"guardrail_span": 1, "redacted_reasoning": 1}


def test_phoenix_dataframe_rows():
    [(obj, dropped)] = import_file("phoenix_dataframe.jsonl")
    assert obj["task"] == {"prompt": "Translate 'good morning' to French."}
    assert obj["steps"] == [
        {"kind": "action", "tool": "dictionary", "arguments": {"phrase": "good morning"}, "call_id": "call_d1"},
        {"kind": "observation", "tool": "dictionary", "content": "bonjour", "call_id": "call_d1"},
        {"kind": "answer", "text": "Bonjour."},
    ]
    assert obj["agent"] == {"name": "translator"}
    assert obj["metadata"]["trace_id"] == "9f2c1b7a3e5d4c6b8a7f6e5d4c3b2a19"
    assert dropped == {}


def test_dataframe_row_times_are_milliseconds():
    line = json.loads((FIXTURES / "phoenix_dataframe.jsonl").read_text().splitlines()[0])
    [(_, span)] = openinference.records(line)
    assert span["start"] == line["start_time"] * 1_000_000
    assert span["attributes"]["llm.input_messages.0.message.role"] == "user"


def test_spans_of_an_agent_outside_any_agent_are_counted():
    agent = {
        "name": "agent",
        "context": {"trace_id": "ab" * 16, "span_id": "01" * 8},
        "start_time": 2,
        "attributes": {"openinference.span.kind": "AGENT", "input.value": "hi", "output.value": "hello"},
    }
    router = {
        "name": "router",
        "context": {"trace_id": "ab" * 16, "span_id": "02" * 8},
        "start_time": 1,
        "attributes": {
            "openinference.span.kind": "LLM",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "route to agent",
        },
    }
    [(obj, dropped)] = import_lines([json.dumps(router), json.dumps(agent)])
    assert obj["steps"] == [{"kind": "answer", "text": "hello"}]
    assert dropped == {"span_outside_agent": 1}


def test_a_trace_without_openinference_spans_is_not_claimed():
    plain = {
        "name": "GET /",
        "context": {"trace_id": "cd" * 16, "span_id": "01" * 8},
        "start_time": 1,
        "attributes": {"http.method": "GET"},
    }
    [(key, span)] = openinference.records(plain)
    assert not openinference.claims([span])
    assert openinference.convert([(1, span)]) == []


MALFORMED = {
    "unknown_kind.jsonl": "span 'plan' (line 2): unknown openinference.span.kind 'PLANNER'",
    "kind_not_text.jsonl": "span 'agent' (line 1): openinference.span.kind is not a string",
    "bad_role.jsonl": "span 'llm' (line 2): llm.input_messages.0: message.role 'narrator' cannot be imported",
    "call_without_name.jsonl": "span 'llm' (line 2): llm.output_messages.0.message.tool_calls.0: tool_call.function.name is missing",
    "unknown_content_type.jsonl": "span 'llm' (line 2): llm.output_messages.0.message.contents.0: message_content.type 'video' "
    "cannot be imported",
    "json_output_only.jsonl": "span 'llm' (line 2): the model's output is only in output.value (JSON)",
    "bad_index.jsonl": "attribute 'llm.input_messages.first.message.role' has no index after 'llm.input_messages'",
    "content_not_text.jsonl": "llm.output_messages.0.message.content: expected a string, got int",
    "duplicate_span.jsonl": "span id 'e000000000000001' appears twice",
    "no_prompt.jsonl": "span 'agent' (line 1): no user input to take the task prompt from",
    "bad_time.jsonl": "start_time: 'yesterday' is not",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_files_are_refused_with_the_reason(name):
    with pytest.raises(TrajectoryFormatError) as refused:
        import_file(f"malformed/{name}")
    assert MALFORMED[name] in str(refused.value)


def test_looks_like():
    for name in ("spans.jsonl", "otlp.jsonl", "phoenix_dataframe.jsonl"):
        for line in (FIXTURES / name).read_text().splitlines():
            assert openinference.looks_like(json.loads(line)), name
    assert not openinference.looks_like({"schema": "arbiter.trajectory/v1", "task": {"prompt": "x"}, "steps": []})
    assert not openinference.looks_like({"messages": [{"role": "user", "content": "hi"}]})
    genai = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "ab" * 16,
                                "spanId": "01" * 8,
                                "name": "chat",
                                "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    assert not openinference.looks_like(genai)
    assert not openinference.looks_like([1, 2])


def _span(span_id, parent, name, kind, start, **attributes):
    return json.dumps(
        {
            "name": name,
            "context": {"trace_id": "ef" * 16, "span_id": span_id},
            "parent_id": parent,
            "start_time": start,
            "attributes": {"openinference.span.kind": kind, **attributes},
        }
    )


def test_spans_under_a_tool_add_no_steps_and_a_direct_sub_agent_is_a_call():
    lines = [
        _span("01" * 8, None, "planner", "AGENT", 1, **{"input.value": "Plan a trip.", "output.value": "Done."}),
        _span("02" * 8, "01" * 8, "summarize", "TOOL", 2, **{"input.value": "long text", "output.value": "short"}),
        _span(
            "03" * 8,
            "02" * 8,
            "ChatCompletion",
            "LLM",
            3,
            **{
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "Summarize: long text",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "short",
            },
        ),
        _span("04" * 8, "01" * 8, "rerank", "RERANKER", 4),
        _span(
            "05" * 8,
            "01" * 8,
            "booker",
            "AGENT",
            5,
            **{"agent.name": "booker", "input.value": "Book it.", "output.value": "Booked."},
        ),
        _span("06" * 8, "05" * 8, "book_hotel", "TOOL", 6, **{"input.value": '{"city": "Rome"}', "output.value": "ok"}),
    ]
    planner, booker = import_lines(lines)
    assert planner[0]["steps"] == [
        {"kind": "action", "tool": "summarize", "arguments": "long text"},
        {"kind": "observation", "tool": "summarize", "content": "short"},
        {"kind": "action", "tool": "booker", "arguments": "Book it."},
        {"kind": "observation", "tool": "booker", "content": "Booked."},
        {"kind": "answer", "text": "Done."},
    ]
    assert planner[1] == {"nested_llm_span": 1, "reranker_span": 1}
    assert booker[0]["steps"] == [
        {"kind": "action", "tool": "book_hotel", "arguments": {"city": "Rome"}},
        {"kind": "observation", "tool": "book_hotel", "content": "ok"},
        {"kind": "answer", "text": "Booked."},
    ]
    assert booker[0]["metadata"]["parent_span_id"] == "01" * 8
