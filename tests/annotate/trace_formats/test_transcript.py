"""The conversation builder every trace converter shares: what is new in each model call, tool
results tied to their calls, the answer, and refusals."""

import pytest

from annotate.trace_formats.transcript import Message, ToolCall, Transcript
from annotate.trajectory_formats import TrajectoryFormatError, parse_trajectory

SYSTEM = Message("system", "Be brief.")
PROMPT = Message("user", "Who founded Veloran?")


def _steps(t: Transcript, **kwargs) -> list[dict]:
    obj, _ = t.canonical(agent={"name": "a"}, **kwargs)
    return parse_trajectory(obj, format="canonical").steps


def test_each_model_call_adds_only_what_is_new():
    t = Transcript()
    calls = [ToolCall("search", '{"q": "Veloran"}', "c1"), ToolCall("open", {"n": 0}, "c2")]
    first_out = Message("assistant", "Two lookups.", calls=calls)
    t.model_input([SYSTEM, PROMPT])
    t.model_output([first_out])
    # The tools ran out of order; the next call repeats the history with their results.
    t.tool_execution(name="open", arguments={"n": 0}, result="Error: no page", call_id="c2", is_error=True)
    t.tool_execution(name="search", arguments={"q": "Veloran"}, result="[0] Veloran Glassworks", call_id="c1")
    t.model_input(
        [
            SYSTEM,
            PROMPT,
            first_out,
            Message("tool", "[0] Veloran Glassworks", call_id="c1"),
            Message("tool", "Error: no page", call_id="c2"),
            Message("user", "And the year?"),
        ]
    )
    t.model_output([Message("assistant", "Ilse Marrow, 1821.", reasoning="The result names her.")])
    assert _steps(t) == [
        {"kind": "thought", "text": "Two lookups."},
        {"kind": "action", "tool": "search", "arguments": {"q": "Veloran"}, "call_id": "c1"},
        {"kind": "action", "tool": "open", "arguments": {"n": 0}, "call_id": "c2"},
        {"kind": "observation", "tool": "open", "content": "Error: no page", "call_id": "c2", "is_error": True},
        {"kind": "observation", "tool": "search", "content": "[0] Veloran Glassworks", "call_id": "c1"},
        {"kind": "observation", "tool": "user", "content": "And the year?"},
        {"kind": "thought", "text": "The result names her."},
        {"kind": "answer", "text": "Ilse Marrow, 1821."},
    ]
    obj, dropped = t.canonical(agent={"name": "a"})
    assert obj["task"]["prompt"] == "Who founded Veloran?" and obj["metadata"]["system_prompt"] == "Be brief."
    assert dropped == {}


def test_results_found_only_in_the_next_input_are_still_observations():
    """No tool spans (the tools ran outside the trace): the results come from the history."""
    t = Transcript()
    t.model_input([PROMPT])
    out = Message("assistant", "", calls=[ToolCall("search", {}, None)])
    t.model_output([out])
    t.model_input([PROMPT, out, Message("tool", "[0] hit")])
    t.model_output([Message("assistant", "Done.")])
    assert [s["kind"] for s in _steps(t)] == ["action", "observation", "answer"]


def test_an_output_missing_from_its_span_is_read_from_the_next_input():
    t = Transcript()
    t.model_input([PROMPT])
    t.model_output([])  # content of this call's output was not recorded
    earlier = Message("assistant", "Looking.", calls=[ToolCall("search", {"q": "x"}, "c1")])
    t.model_input([PROMPT, earlier, Message("tool", "hit", call_id="c1")])
    t.model_output([Message("assistant", "Found.")])
    assert [s["kind"] for s in _steps(t)] == ["thought", "action", "observation", "answer"]


def test_a_tool_no_model_asked_for_is_an_action_and_its_observation():
    t = Transcript()
    t.user("Summarise the page.")
    t.tool_execution(name="fetch", arguments='{"url": "https://x"}', result="<html>")
    t.tool_execution(name="fetch", arguments="plain words", result="again")
    steps = _steps(t, final_output="A page.")
    assert steps == [
        {"kind": "action", "tool": "fetch", "arguments": {"url": "https://x"}},
        {"kind": "observation", "tool": "fetch", "content": "<html>"},
        {"kind": "action", "tool": "fetch", "arguments": "plain words"},
        {"kind": "observation", "tool": "fetch", "content": "again"},
        {"kind": "answer", "text": "A page."},
    ]


def test_a_second_run_of_an_answered_call_is_kept_not_merged():
    t = Transcript()
    t.user("q")
    t.model_output([Message("assistant", "", calls=[ToolCall("search", {}, "c1")])])
    t.tool_execution(name="search", arguments={}, result="timeout", call_id="c1", is_error=True)
    t.tool_execution(name="search", arguments={}, result="hit", call_id="c1")  # a retry under the same id
    kinds = [(s["kind"], s.get("call_id"), s.get("content")) for s in _steps(t, final_output="x")]
    assert kinds == [
        ("action", "c1", None),
        ("observation", "c1", "timeout"),
        ("action", None, None),
        ("observation", None, "hit"),
        ("answer", None, None),
    ]


def test_a_repeated_output_adds_its_calls_once_and_history_before_the_trace_adds_nothing():
    t = Transcript()
    t.model_input([PROMPT, Message("tool", "from an earlier session", call_id="old")])
    out = Message("assistant", "", calls=[ToolCall("search", {}, "c1")])
    t.model_output([out])
    t.model_output([Message("assistant", "", calls=[ToolCall("search", {}, "c1")])])
    t.model_input([PROMPT, Message("tool", "stale", call_id="old"), out, Message("tool", "hit", call_id="c1")])
    assert [s["kind"] for s in _steps(t, final_output="done")] == ["action", "observation", "answer"]


def test_the_agents_own_output_is_the_answer_only_without_model_text_and_is_kept_when_it_differs():
    t = Transcript()
    t.user("q")
    t.model_output([Message("assistant", "model says")])
    obj, _ = t.canonical(agent=None, final_output="agent returns")
    assert obj["steps"][-1] == {"kind": "answer", "text": "model says"}
    assert obj["metadata"]["agent_output"] == "agent returns"


def test_drops_are_counted_and_kept_in_metadata():
    t = Transcript()
    t.user("q")
    t.drop("image_part", 2)
    obj, dropped = t.canonical(agent=None, final_output="a")
    assert dropped == {"image_part": 2} and obj["metadata"]["dropped"] == {"image_part": 2}


@pytest.mark.parametrize(
    "build, reason",
    [
        (lambda t: t.model_output([Message("user", "x")]), "model output with role 'user'"),
        (lambda t: t.model_input([Message("function", "x")]), "role 'function'"),
        (lambda t: t.tool_execution(name="", arguments={}, result=""), "without the tool's name"),
        (lambda t: t.model_output([Message("assistant", calls=[ToolCall("", {})])]), "without the tool's name"),
    ],
)
def test_malformed_events_are_refused(build, reason):
    with pytest.raises(TrajectoryFormatError, match=reason):
        build(Transcript())


def test_nothing_to_import_is_refused():
    with pytest.raises(TrajectoryFormatError, match="no user input"):
        Transcript().canonical(agent=None)
    t = Transcript()
    t.user("q")
    with pytest.raises(TrajectoryFormatError, match="no model output"):
        t.canonical(agent=None)


def test_a_later_turn_leaves_the_earlier_turns_out_and_counts_them():
    """The agent's input is this turn's question; the model is given the conversation so far."""
    t = Transcript()
    t.user("And in Rome?")
    history = [
        SYSTEM,
        Message("user", "Weather in Paris?"),
        Message("assistant", "Sunny."),
        Message("user", "And in Rome?"),
    ]
    t.model_input(history)
    out = Message("assistant", "", calls=[ToolCall("weather", {"city": "Rome"}, "c1")])
    t.model_output([out])
    t.model_input([*history, out, Message("tool", "Rain.", call_id="c1"), Message("user", "And in Rome?")])
    t.model_output([Message("assistant", "Rain in Rome.")])
    obj, dropped = t.canonical(agent=None)
    assert obj["task"]["prompt"] == "And in Rome?" and dropped == {"earlier_turn_message": 2}
    assert [(s["kind"], s.get("content", s.get("text"))) for s in obj["steps"]] == [
        ("action", None),
        ("observation", "Rain."),
        ("observation", "And in Rome?"),
        ("answer", "Rain in Rome."),
    ]


def test_id_less_results_of_parallel_calls_to_one_tool_find_their_call_by_arguments():
    t = Transcript()
    t.user("Paris and Rome?")
    t.model_output(
        [
            Message(
                "assistant", "", calls=[ToolCall("weather", {"city": "Paris"}), ToolCall("weather", {"city": "Rome"})]
            )
        ]
    )
    t.tool_execution(name="weather", arguments={"city": "Rome"}, result="Rain.")
    t.tool_execution(name="weather", arguments='{"city": "Paris"}', result="Sun.")
    steps = _steps(t, final_output="x")
    assert [(s["kind"], s.get("arguments"), s.get("content")) for s in steps[:4]] == [
        ("action", {"city": "Paris"}, None),
        ("action", {"city": "Rome"}, None),
        ("observation", None, "Rain."),
        ("observation", None, "Sun."),
    ]
    assert len(steps) == 5  # the results answered the two calls: no extra actions
