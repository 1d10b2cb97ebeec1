"""Langfuse traces (annotate/trace_formats/langfuse.py), read as the import pipeline reads them."""

import json
from pathlib import Path

import pytest

from annotate.trace_formats import langfuse
from annotate.trajectory_formats import TrajectoryFormatError
from tests.annotate.trace_formats import pipeline

FIXTURES = Path(__file__).parent / "fixtures" / "langfuse"


def import_lines(lines: list[str]) -> list[tuple[dict, dict]]:
    return pipeline.import_all(langfuse, lines)


def import_file(name: str) -> list[tuple[dict, dict]]:
    return import_lines((FIXTURES / name).read_text().splitlines())


WEATHER_STEPS = [
    {"kind": "thought", "text": "I'll check both cities."},
    {"kind": "action", "tool": "get_weather", "arguments": {"city": "Paris"}, "call_id": "call_1"},
    {"kind": "action", "tool": "get_weather", "arguments": {"city": "Berlin"}, "call_id": "call_2"},
    {"kind": "observation", "tool": "get_weather", "content": '{"temp_c": 18, "sky": "sunny"}', "call_id": "call_1"},
    {
        "kind": "observation",
        "tool": "get_weather",
        "content": "TimeoutError: upstream did not answer in 5s",
        "call_id": "call_2",
        "is_error": True,
    },
    {"kind": "answer", "text": "Paris is 18°C and sunny; Berlin could not be reached."},
]
RESEARCH_STEPS = [
    {
        "kind": "action",
        "tool": "ask_researcher",
        "arguments": {"question": "author of The Glass Orchard"},
        "call_id": "call_r1",
    },
    {
        "kind": "observation",
        "tool": "ask_researcher",
        "content": "The Glass Orchard (1987) was written by Mira Okafor.",
        "call_id": "call_r1",
    },
    {"kind": "thought", "text": "It was written by Mira Okafor (1987)."},
    {"kind": "observation", "tool": "user", "content": "When was she born?"},
    {"kind": "answer", "text": "The sources I found do not give her birth year."},
]
RESEARCHER_STEPS = [
    {"kind": "action", "tool": "search", "arguments": {"q": "The Glass Orchard novel"}, "call_id": "call_s1"},
    {
        "kind": "observation",
        "tool": "search",
        "content": "The Glass Orchard is a 1987 novel by Mira Okafor.",
        "call_id": "call_s1",
    },
    {"kind": "answer", "text": "The Glass Orchard (1987) was written by Mira Okafor."},
]


def test_interleaved_traces_become_one_trajectory_per_agent_in_order():
    out = import_file("agents.jsonl")
    assert [(o["metadata"]["trace_id"], o["agent"]["name"]) for o, _ in out] == [
        ("tr-a", "weather-agent"),
        ("tr-b", "research-agent"),
        ("tr-b", "researcher"),
        ("tr-c", "qa-bot"),
    ]


def test_parallel_calls_and_a_failed_tool_keep_their_call_ids():
    weather, dropped = import_file("agents.jsonl")[0]
    assert weather["task"] == {"prompt": "What's the weather in Paris and Berlin?"}
    assert weather["steps"] == WEATHER_STEPS
    assert weather["agent"] == {"name": "weather-agent", "version": "1.2.0"}
    assert dropped == {"event": 1}
    assert weather["metadata"]["system_prompt"] == "You are a weather assistant."
    assert weather["metadata"]["tools"][0]["function"]["name"] == "get_weather"
    assert {
        k: weather["metadata"][k]
        for k in ("source_format", "trace_id", "agent_observation_id", "session_id", "user_id", "tags")
    } == {
        "source_format": "langfuse",
        "trace_id": "tr-a",
        "agent_observation_id": "a-agent",
        "session_id": "sess-1",
        "user_id": "u-7",
        "tags": ["weather"],
    }


def test_a_nested_agent_is_its_own_trajectory_and_a_call_in_its_parent():
    _, (research, dropped), (researcher, sub_dropped), _ = import_file("agents.jsonl")
    assert research["task"]["prompt"] == "Who wrote The Glass Orchard?"
    assert research["steps"] == RESEARCH_STEPS  # the CHAIN is walked through, the second user turn kept
    assert research["agent"] == {"name": "research-agent", "version": "0.3.1"}
    assert dropped == {"outside_agent": 1, "score": 1}  # the EMBEDDING beside the agent, the trace's score
    assert researcher["task"]["prompt"] == "Find the author of The Glass Orchard."
    assert researcher["steps"] == RESEARCHER_STEPS
    assert researcher["agent"] == {"name": "researcher", "version": "r42"}
    assert researcher["metadata"]["agent_observation_id"] == "b-sub"
    assert sub_dropped == {}


def test_a_trace_with_embedded_observations_and_an_image():
    qa, dropped = import_file("agents.jsonl")[3]
    assert qa["task"]["prompt"] == "What is in this picture?"
    assert qa["steps"] == [{"kind": "answer", "text": "A red bicycle leaning on a wall."}]
    assert qa["agent"] == {"name": "qa-bot", "version": "2024-06-01"}
    assert dropped == {"span": 1, "image": 1}


def test_without_agent_or_trace_record_the_trace_is_one_run_named_after_the_model():
    [(obj, dropped)] = import_file("no_agent.jsonl")
    assert obj["task"]["prompt"].startswith("Using: Refunds within 30 days.")
    assert obj["steps"] == [
        {"kind": "action", "tool": "vector-search", "arguments": {"query": "refund policy"}},
        {
            "kind": "observation",
            "tool": "vector-search",
            "content": '[{"pageContent": "Refunds within 30 days.", "metadata": {"source": "faq.md"}}]',
        },
        {"kind": "answer", "text": "Yes, refunds are accepted within 30 days."},
    ]
    assert obj["agent"] == {"name": "claude-3-5-sonnet", "version": ""}
    assert obj["metadata"] == {"source_format": "langfuse", "trace_id": "tr-d"}
    assert dropped == {}


def test_the_trace_input_and_output_stand_in_when_no_model_call_has_them():
    trace = {
        "id": "tr-e",
        "timestamp": "2024-11-05T10:00:00Z",
        "name": "router",
        "input": {"query": "reset password"},
        "output": {"route": "account"},
        "observations": [],
    }
    [(obj, _)] = import_lines([json.dumps(trace)])
    assert obj["task"]["prompt"] == '{"query": "reset password"}'
    assert obj["steps"] == [{"kind": "answer", "text": '{"route": "account"}'}]


def observation(id, kind, name, second, parent=None, **fields):
    return json.dumps(
        {
            "id": id,
            "traceId": "tr-f",
            "type": kind,
            "name": name,
            "parentObservationId": parent,
            "startTime": f"2024-11-05T10:00:{second:02d}.000Z",
            "level": "DEFAULT",
            **fields,
        }
    )


def test_failed_calls_reasoning_and_what_a_tool_ran_inside_it():
    tools = [{"type": "function", "function": {"name": "run_sql", "parameters": {"type": "object"}}}]
    ask = [{"role": "user", "content": "How many orders today?"}]
    call = {
        "role": "assistant",
        "content": None,
        "reasoning_content": "Count today's rows.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "run_sql", "arguments": "SELECT count(*)"}}
        ],
    }
    lines = [
        observation(
            "f1",
            "GENERATION",
            "chat",
            1,
            model="deepseek-r1",
            input=ask,
            output=None,
            level="ERROR",
            statusMessage="429 rate limited",
        ),
        observation(
            "f2",
            "GENERATION",
            "chat",
            2,
            model="deepseek-r1",
            input=ask,
            output=call,
            modelParameters={"temperature": "0", "tools": json.dumps(tools)},
        ),
        observation(
            "f3",
            "TOOL",
            "run_sql",
            3,
            input="SELECT count(*)",
            output="partial: 12",
            level="ERROR",
            statusMessage="connection reset",
            metadata={"tool_call_id": "c1"},
        ),
        observation("f4", "GENERATION", "fix-sql", 4, "f3", model="deepseek-r1", input="repair", output="SELECT 1"),
        observation(
            "f5",
            "GENERATION",
            "chat",
            5,
            model="deepseek-r1",
            input=ask + [call, {"role": "tool", "tool_call_id": "c1", "content": "partial: 12"}],
            output={"role": "assistant", "content": "At least 12.", "refusal": None},
        ),
    ]
    [(obj, dropped)] = import_lines(lines)
    assert obj["steps"] == [
        {"kind": "thought", "text": "Count today's rows."},
        {"kind": "action", "tool": "run_sql", "arguments": "SELECT count(*)", "call_id": "c1"},
        {
            "kind": "observation",
            "tool": "run_sql",
            "content": "partial: 12\nconnection reset",
            "call_id": "c1",
            "is_error": True,
        },
        {"kind": "answer", "text": "At least 12."},
    ]
    assert obj["metadata"]["tools"] == tools
    assert dropped == {"failed_generation": 1, "inside_tool": 1}


def test_looks_like_claims_langfuse_lines_only():
    for line in (FIXTURES / "agents.jsonl").read_text().splitlines():
        assert langfuse.looks_like(json.loads(line))
    assert not langfuse.looks_like({"schema": "arbiter.trajectory/v1", "task": {"prompt": "x"}, "steps": []})
    assert not langfuse.looks_like({"messages": [{"role": "user", "content": "hi"}]})
    assert not langfuse.looks_like({"id": "r1", "run_type": "chain", "trace_id": "t1", "inputs": {}, "outputs": {}})
    assert not langfuse.looks_like({"resourceSpans": []})
    assert not langfuse.looks_like({"traceId": "ab", "spanId": "cd", "name": "chat", "type": "SPAN"})
    assert not langfuse.looks_like({"id": "x", "timestamp": "2024-11-05T10:00:00Z"})


MALFORMED = {
    "unknown_type": "observation 'flow' (id 'm-1', line 1): type 'WORKFLOW' is not a Langfuse observation type",
    "bad_time": "observation 'chat' (id 'm-gen', line 1): startTime: 'yesterday at noon' is not an ISO 8601 time",
    "other_trace": "trace 'tr-m': observations[0]: traceId 'tr-z' is another trace",
    "bad_output": "observation 'chat' (id 'm-gen', line 1): output: a dict without a role is not a model output",
    "tool_without_name": "observation 'm-tool' (line 2): a TOOL observation needs its name",
    "duplicate_id": "observation id 'm-gen' appears twice (line 1 and line 2)",
    "unknown_role": "input[0].role: 'function' is not a chat role",
    "missing_observations": "trace 'tr-m' (line 1) lists observations that are not in the file: 'm-gone'",
    "bad_level": "level 'FATAL' is not one of DEBUG, DEFAULT, WARNING, ERROR",
    "bad_part": "input[0].content[0]: part type 'input_audio' cannot be imported",
    "cycle": "trace 'tr-m' form a cycle",
    "no_prompt": "trace 'tr-m': no user input to take the task prompt from",
    "bad_arguments": "output.tool_calls[0]: expected the tool's name",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_files_are_refused_with_the_reason(name):
    with pytest.raises(TrajectoryFormatError) as error:
        import_file(f"malformed/{name}.jsonl")
    assert MALFORMED[name] in str(error.value)


def test_a_line_that_is_neither_trace_nor_observation_is_refused():
    with pytest.raises(TrajectoryFormatError, match="not a Langfuse record"):
        list(langfuse.records({"id": "x", "name": "no timestamp"}))
