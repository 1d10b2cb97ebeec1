"""LangSmith run exports: records filed by trace, converted, and checked as canonical v1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotate.trace_formats import langsmith
from annotate.trajectory_formats import TrajectoryFormatError
from tests.annotate.trace_formats import pipeline

FIXTURES = Path(__file__).parent / "fixtures" / "langsmith"
TRACE_A = "1ef0a000-0000-4000-8000-00000000000a"
TRACE_B = "2ef0b000-0000-4000-8000-00000000000b"
TRACE_C = "3ef0c000-0000-4000-8000-00000000000c"


def import_lines(lines: list[str]) -> dict[str, list]:
    return pipeline.import_by_trace(langsmith, lines)


def import_file(name: str) -> dict[str, list]:
    return import_lines((FIXTURES / name).read_text().splitlines())


def only(results: list) -> tuple[dict, dict]:
    assert len(results) == 1
    return results[0]


# The main fixture: three traces interleaved, runs out of order -----------------------------


def test_langgraph_agent_with_serialized_messages():
    obj, dropped = only(import_file("agents.jsonl")[TRACE_A])
    assert obj["task"] == {"prompt": "Where was Tamsin Quell born, and what is the weather there?"}
    assert obj["agent"] == {"name": "research-agent", "version": "rev-7"}
    assert obj["steps"] == [
        {"kind": "thought", "text": "I'll look up the person and the weather at once."},
        {"kind": "action", "tool": "search", "arguments": {"query": "Tamsin Quell birthplace"}, "call_id": "call_s1"},
        {"kind": "action", "tool": "get_weather", "arguments": {"city": "Drevholm"}, "call_id": "call_w1"},
        {
            "kind": "observation",
            "tool": "search",
            "call_id": "call_s1",
            "content": "[0] Tamsin Quell (born 1961 in Drevholm) is a cartographer.",
        },
        {
            "kind": "observation",
            "tool": "get_weather",
            "call_id": "call_w1",
            "is_error": True,
            "content": "WeatherServiceTimeout('upstream timed out')",
        },
        {
            "kind": "action",
            "tool": "research_assistant",
            "arguments": {"question": "Drevholm climate"},
            "call_id": "call_r1",
        },
        {
            "kind": "observation",
            "tool": "research_assistant",
            "call_id": "call_r1",
            "content": "Drevholm has a mild oceanic climate.",
        },
        {"kind": "thought", "text": "The weather tool failed; report the climate instead."},
        {"kind": "answer", "text": "Tamsin Quell was born in Drevholm, which has a mild oceanic climate."},
    ]
    # the sub-agent's chain and model call inside the research_assistant tool; the user's image
    assert dropped == {"tool_inner_run": 2, "image": 1}
    metadata = obj["metadata"]
    assert metadata["system_prompt"] == "You are a careful research agent."
    assert [t["function"]["name"] for t in metadata["tools"]] == ["search", "get_weather", "research_assistant"]
    assert metadata["dropped"] == dropped
    assert {k: metadata[k] for k in ("source_format", "trace_id", "root_run_id", "thread_id", "tags")} == {
        "source_format": "langsmith",
        "trace_id": TRACE_A,
        "root_run_id": "1ef0a000-0000-4000-8000-000000000001",
        "thread_id": "thread-42",
        "tags": ["prod"],
    }
    assert "agent_output" not in metadata  # the root's last message is the answer


def test_openai_wrapper_multi_turn():
    obj, dropped = only(import_file("agents.jsonl")[TRACE_B])
    assert obj["task"] == {"prompt": "What's the weather in Oslo?"}
    assert obj["agent"] == {"name": "weather-bot", "version": "v2.1"}
    assert obj["steps"] == [
        {"kind": "action", "tool": "get_weather", "arguments": {"city": "Oslo"}, "call_id": "call_o1"},
        {"kind": "observation", "tool": "get_weather", "content": "4°C, clear", "call_id": "call_o1"},
        {"kind": "thought", "text": "It is 4°C and clear in Oslo."},
        {"kind": "observation", "tool": "user", "content": "And in Bergen?"},
        {"kind": "action", "tool": "get_weather", "arguments": {"city": "Bergen"}, "call_id": "call_b1"},
        {"kind": "observation", "tool": "get_weather", "content": "7°C, rain", "call_id": "call_b1"},
        {"kind": "answer", "text": "Bergen: 7°C and rain."},
    ]
    assert dropped == {}
    assert obj["metadata"]["system_prompt"] == "You are a weather bot."
    assert obj["metadata"]["tools"][0]["function"]["name"] == "get_weather"


def test_nested_child_runs_line_with_retriever_and_embedding():
    obj, dropped = only(import_file("agents.jsonl")[TRACE_C])
    assert obj["task"] == {"prompt": "What is 17 * 23? Check the docs first."}
    assert obj["agent"] == {"name": "AgentExecutor", "version": ""}
    assert obj["steps"] == [
        {"kind": "action", "tool": "docs_retriever", "arguments": {"query": "multiplication"}},
        {
            "kind": "observation",
            "tool": "docs_retriever",
            "content": "[0] (math.md) Multiplication is repeated addition.\n\n[1] Use the calculator tool for arithmetic.",
        },
        {"kind": "thought", "text": "Let me compute it."},
        {"kind": "action", "tool": "calculator", "arguments": {"expression": "17 * 23"}, "call_id": "toolu_01"},
        {"kind": "observation", "tool": "calculator", "content": "391", "call_id": "toolu_01"},
        {"kind": "answer", "text": "17 * 23 = 391."},
    ]
    assert dropped == {"embedding_run": 1}


def test_traces_come_in_order_of_first_appearance():
    assert list(import_file("agents.jsonl")) == [TRACE_B, TRACE_A, TRACE_C]


def test_file_order_does_not_matter():
    lines = (FIXTURES / "agents.jsonl").read_text().splitlines()
    forward, backward = import_lines(lines), import_lines(lines[::-1])
    for trace in (TRACE_A, TRACE_B, TRACE_C):
        assert forward[trace][0][0]["steps"] == backward[trace][0][0]["steps"]


# Shapes ------------------------------------------------------------------------------------


def run(**fields) -> dict:
    base = {
        "id": "r1",
        "trace_id": "t1",
        "parent_run_id": None,
        "run_type": "chain",
        "name": "agent",
        "start_time": "2024-05-01T12:00:00.000000",
        "inputs": {},
        "outputs": None,
        "error": None,
        "extra": {},
    }
    return {**base, **fields}


def llm(run_id: str, second: int, messages: list, output: dict, **fields) -> dict:
    return run(
        **{
            "id": run_id,
            "parent_run_id": "r1",
            "run_type": "llm",
            "name": "ChatOpenAI",
            "start_time": f"2024-05-01T12:00:{second:02d}",
            "inputs": {"messages": messages},
            "outputs": {"choices": [{"message": output}]},
            **fields,
        }
    )


def lines_of(*runs: dict) -> list[str]:
    return [json.dumps(r) for r in runs]


def test_plain_langchain_message_dicts_and_string_tool_input():
    user = {"type": "human", "content": "Look up Oslo."}
    call = {"type": "ai", "content": "", "tool_calls": [{"name": "lookup", "args": {}, "id": "c1"}]}
    results = import_lines(
        lines_of(
            run(inputs={"input": "Look up Oslo."}, outputs={"output": "Oslo is in Norway."}),
            run(
                id="l1",
                parent_run_id="r1",
                run_type="llm",
                name="ChatModel",
                start_time="2024-05-01T12:00:01",
                inputs={"messages": [[user]]},
                outputs={"generations": [[{"text": "", "message": call}]]},
            ),
            run(
                id="x1",
                parent_run_id="r1",
                run_type="tool",
                name="lookup",
                start_time="2024-05-01T12:00:02",
                inputs={"input": "Oslo"},
                outputs={"output": "Oslo is in Norway."},
            ),
        )
    )
    obj, _ = only(results["t1"])
    assert obj["steps"] == [
        {"kind": "action", "tool": "lookup", "arguments": {}, "call_id": "c1"},
        {"kind": "observation", "tool": "lookup", "content": "Oslo is in Norway.", "call_id": "c1"},
        {"kind": "answer", "text": "Oslo is in Norway."},  # no plain model text: the root's output
    ]


def test_tool_run_by_the_code_keeps_its_string_input_as_arguments():
    results = import_lines(
        lines_of(
            run(inputs={"question": "What is in the log?"}, outputs={"output": "Nothing."}),
            run(
                id="x1",
                parent_run_id="r1",
                run_type="tool",
                name="grep",
                start_time="2024-05-01T12:00:02",
                inputs={"input": "ERROR /var/log/app"},
                outputs={"output": ""},
            ),
        )
    )
    obj, _ = only(results["t1"])
    assert obj["task"] == {"prompt": "What is in the log?"}  # no model call: the root's only input
    assert obj["steps"] == [
        {"kind": "action", "tool": "grep", "arguments": "ERROR /var/log/app"},
        {"kind": "observation", "tool": "grep", "content": ""},
        {"kind": "answer", "text": "Nothing."},
    ]


def test_key_from_dotted_order_and_model_name_as_agent():
    root = {
        "id": "aaa",
        "run_type": "llm",
        "name": "ChatOpenAI",
        "dotted_order": "20240501T120000000000Zaaa",
        "inputs": {"messages": [{"role": "user", "content": "Hi"}], "model": "gpt-4o-mini"},
        "outputs": {
            "choices": [
                {"message": {"role": "assistant", "content": "Hello."}},
                {"message": {"role": "assistant", "content": "Hi there."}},
            ]
        },
    }
    assert langsmith.looks_like(root)
    results = import_lines(lines_of(root))
    obj, dropped = only(results["aaa"])
    assert obj["agent"] == {"name": "gpt-4o-mini", "version": ""}
    assert obj["steps"] == [{"kind": "answer", "text": "Hello."}]
    assert dropped == {"extra_generation": 1}


def test_failed_model_call_invalid_call_and_structured_agent_output():
    user = {"role": "user", "content": "Summarise the report."}
    bad_call = {
        "type": "ai",
        "content": "Reading it.",
        "invalid_tool_calls": [{"name": "read", "args": "{'path': ", "id": "c9", "error": "bad JSON"}],
    }
    results = import_lines(
        lines_of(
            run(
                inputs={"task": "Summarise the report."},
                outputs={"summary": "Short.", "pages": 3},
                error="GraphRecursionError: limit reached",
            ),
            llm("l1", 1, [user], {}, outputs=None, error="RateLimitError: 429"),
            run(
                id="l2",
                parent_run_id="r1",
                run_type="llm",
                name="ChatModel",
                start_time="2024-05-01T12:00:02",
                inputs={"messages": [[{"type": "human", "content": "Summarise the report."}]]},
                outputs={"generations": [[{"text": "Reading it.", "message": bad_call}]]},
            ),
        )
    )
    obj, dropped = only(results["t1"])
    assert obj["steps"] == [
        {"kind": "thought", "text": "Reading it."},
        {"kind": "action", "tool": "read", "arguments": "{'path': ", "call_id": "c9"},
        {"kind": "answer", "text": '{"summary": "Short.", "pages": 3}'},
    ]
    assert dropped == {"failed_model_call": 1}
    assert obj["metadata"]["error"] == "GraphRecursionError: limit reached"


def test_two_roots_in_one_trace_are_two_runs():
    results = import_lines(
        lines_of(
            run(id="r1", inputs={"q": "First?"}, outputs={"output": "One."}),
            run(id="r2", start_time="2024-05-01T12:00:05", inputs={"q": "Second?"}, outputs={"output": "Two."}),
        )
    )
    assert [obj["task"]["prompt"] for obj, _ in results["t1"]] == ["First?", "Second?"]


# Refusals ------------------------------------------------------------------------------------

REFUSALS = [
    (lines_of(run(run_type="workflow")), "workflow run 'agent' (line 1): run_type 'workflow' is unknown"),
    (lines_of(run(id=None)), "chain run 'agent' (line 1): id is missing or not a string"),
    (
        lines_of(run(extra={"metadata": ["v1"]})),
        "chain run 'agent' (line 1): extra.metadata: expected an object, got list",
    ),
    (
        lines_of(run(start_time="yesterday")),
        "chain run 'agent' (line 1): start_time: 'yesterday' is not an ISO 8601 time",
    ),
    (lines_of(run(start_time=None)), "the run has neither start_time nor dotted_order"),
    (
        lines_of({"id": "c", "run_type": "tool", "name": "t", "parent_run_id": "p"}),
        "tool run 't': a child run without trace_id or dotted_order cannot be filed under its trace",
    ),
    (
        lines_of({"id": "c", "run_type": "tool", "name": "t", "dotted_order": "2024-05-01Zc"}),
        "dotted_order segment '2024-05-01Zc' is not <YYYYMMDDTHHMMSSffffffZ><run id>",
    ),
    (
        lines_of(
            run(),
            llm(
                "l1",
                1,
                [{"role": "user", "content": "Hi"}],
                {"role": "assistant", "content": "x"},
                inputs={"prompts": ["Hi"]},
            ),
        ),
        "llm run 'ChatOpenAI' (line 2): inputs.prompts is a text-completion model call",
    ),
    (
        lines_of(run(), llm("l1", 1, [{"role": "critic", "content": "Hi"}], {"role": "assistant", "content": "x"})),
        "llm run 'ChatOpenAI' (line 2): inputs.messages[0]: role 'critic' cannot be imported",
    ),
    (
        lines_of(
            run(),
            llm(
                "l1",
                1,
                [{"role": "user", "content": [{"type": "input_audio", "data": "..."}]}],
                {"role": "assistant", "content": "x"},
            ),
        ),
        "inputs.messages[0].content[0]: a content part of type 'input_audio' cannot be imported",
    ),
    (
        lines_of(
            run(),
            llm(
                "l1",
                1,
                [
                    {
                        "lc": 1,
                        "type": "constructor",
                        "id": ["langchain", "schema", "messages", "FunctionMessage"],
                        "kwargs": {},
                    }
                ],
                {"role": "assistant", "content": "x"},
            ),
        ),
        "message type 'FunctionMessage' cannot be imported",
    ),
    (
        lines_of(
            run(),
            run(
                id="l1",
                parent_run_id="r1",
                run_type="llm",
                name="ChatOpenAI",
                inputs={"messages": [{"role": "user", "content": "Hi"}]},
                outputs={"output": [{"type": "message"}]},
            ),
        ),
        "llm run 'ChatOpenAI' (line 2): outputs hold neither generations (LangChain) nor choices",
    ),
    (
        lines_of(run(), run(id="x1", parent_run_id="r1", run_type="tool", name="t", outputs="done")),
        "tool run 't' (line 2): outputs: expected an object, got str",
    ),
    (lines_of(run(), run(id="r1", name="again")), "chain run 'again' (line 2): run id 'r1' appears twice in the trace"),
    (lines_of(run(inputs={}, outputs={"output": "x"})), "no user input to take the task prompt from"),
    (
        ['{"id": "r1", "run_type": "chain", "name": "a", "trace_id": "t", "child_runs": {"id": "x"}}'],
        "chain run 'a': child_runs is not a list",
    ),
]


@pytest.mark.parametrize("lines,reason", REFUSALS)
def test_malformed_runs_are_refused_with_the_reason(lines, reason):
    with pytest.raises(TrajectoryFormatError) as error:
        import_lines(lines)
    assert reason in str(error.value)


def test_not_a_run_object():
    with pytest.raises(TrajectoryFormatError, match="expected a run object, got list"):
        list(langsmith.records([1, 2]))


# Detection ---------------------------------------------------------------------------------------


def test_looks_like_runs_and_not_other_formats():
    for line in (FIXTURES / "agents.jsonl").read_text().splitlines():
        assert langsmith.looks_like(json.loads(line))
    assert not langsmith.looks_like({"schema": "arbiter.trajectory/v1", "task": {"prompt": "x"}, "steps": []})
    assert not langsmith.looks_like({"messages": [{"role": "user", "content": "Hi"}]})
    assert not langsmith.looks_like({"context": {"trace_id": "1", "span_id": "2"}, "name": "chat"})
    assert not langsmith.looks_like({"run_type": "llm", "name": "lonely"})  # nothing ties it to a trace
    assert not langsmith.looks_like([{"run_type": "llm", "trace_id": "t"}])
