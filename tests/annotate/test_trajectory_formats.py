"""Parsing and checking of both trajectory formats (no database)."""

import json

import pytest

from annotate.trajectory_formats import (
    Limits,
    TrajectoryFormatError,
    parse_line,
    parse_trajectory,
)
from tests.samples import canonical, chat_parallel


def test_canonical_round_trip_keeps_steps_and_takes_answer_from_answer_step():
    parsed = parse_trajectory(canonical())
    assert [s["kind"] for s in parsed.steps] == ["thought", "action", "observation", "answer"]
    assert parsed.answer == "Ilse Marrow"
    assert parsed.task["external_id"] == "t1"
    assert parsed.agent == {"name": "agent", "version": "1"}


def test_chat_transcript_with_parallel_tool_calls_maps_onto_steps():
    parsed = parse_trajectory(chat_parallel())
    kinds = [(s["kind"], s.get("tool"), s.get("call_id")) for s in parsed.steps]
    assert kinds == [
        ("thought", None, None),
        ("action", "search", "call_1"),
        ("action", "search", "call_2"),
        ("observation", "search", "call_2"),
        ("observation", "search", "call_1"),
        ("answer", None, None),
    ]
    assert parsed.steps[1]["arguments"] == {"query": "Tamsin Quell"}
    assert parsed.task["prompt"] == "Where was Tamsin Quell born?"
    assert parsed.answer == "Drevholm"
    assert parsed.metadata["system_prompt"] == "You are a research agent."


def test_chat_arguments_that_are_not_json_are_kept_as_the_raw_string():
    obj = chat_parallel()
    obj["messages"][2]["tool_calls"][0]["function"]["arguments"] = "{query: oops"
    parsed = parse_trajectory(obj)
    assert parsed.steps[1]["arguments"] == "{query: oops"


def test_chat_tool_message_for_unknown_call_is_refused():
    obj = chat_parallel()
    obj["messages"][3]["tool_call_id"] = "nope"
    with pytest.raises(TrajectoryFormatError, match="unknown tool_call_id 'nope'"):
        parse_trajectory(obj)


def test_chat_without_user_message_is_refused():
    with pytest.raises(TrajectoryFormatError, match="no user message"):
        parse_trajectory({"messages": [{"role": "assistant", "content": "hi"}]})


def test_missing_external_id_is_derived_from_the_prompt_stably():
    a = canonical()
    del a["task"]["external_id"]
    first, second = parse_trajectory(a), parse_trajectory(json.loads(json.dumps(a)))
    assert first.task["external_id"].startswith("prompt-")
    assert first.task["external_id"] == second.task["external_id"]


def test_content_hash_ignores_metadata_but_not_steps():
    base = parse_trajectory(canonical())
    with_meta = parse_trajectory(canonical(metadata={"run": 7}))
    other = parse_trajectory(canonical(n=1))
    assert base.content_hash == with_meta.content_hash
    assert base.content_hash != other.content_hash


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "invalid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"schema": "arbiter.trajectory/v9", "task": {"prompt": "x"}, "steps": []}', "unknown schema version"),
        (
            b'{"schema": "arbiter.trajectory/v1", "steps": [{"kind": "thought", "text": "x"}]}',
            "'task' is a required property",
        ),
        (b'{"schema": "arbiter.trajectory/v1", "task": {"prompt": "x"}}', "'steps' is a required property"),
        (
            b'{"schema": "arbiter.trajectory/v1", "task": {"prompt": 5}, "steps": [{"kind": "thought", "text": "x"}]}',
            "task.prompt: 5 is not of type 'string'",
        ),
        (
            b'{"schema": "arbiter.trajectory/v1", "task": {"prompt": "x"}, "steps": [{"kind": "dance"}]}',
            "steps[0].kind: 'dance' is not one of",
        ),
        (
            b'{"schema": "arbiter.trajectory/v1", "task": {"prompt": "x"}, "steps": [{"kind": "action", "tool": "s"}]}',
            "'arguments' is a required property",
        ),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"hello": 1}', "neither a canonical trajectory"),
    ],
)
def test_bad_lines_get_a_reason(raw, reason):
    with pytest.raises(TrajectoryFormatError) as info:
        parse_line(raw)
    assert reason in str(info.value)


def test_text_over_the_limit_is_refused_with_its_path():
    obj = canonical()
    obj["steps"][2]["content"] = "x" * 101
    with pytest.raises(
        TrajectoryFormatError, match=r"steps\[2\].content: text of 101 characters is over the limit of 100"
    ):
        parse_trajectory(obj, Limits(max_text_chars=100))


def test_too_many_steps_is_refused():
    obj = canonical()
    with pytest.raises(TrajectoryFormatError, match="4 steps is over the limit of 3"):
        parse_trajectory(obj, Limits(max_steps=3))


def test_html_in_text_is_kept_as_given():
    obj = canonical(answer="<script>alert(1)</script>")
    assert parse_trajectory(obj).answer == "<script>alert(1)</script>"


def test_text_with_a_nul_character_is_refused_with_where_it_is():
    obj = canonical()
    obj["steps"][0]["text"] = "bad \x00 byte"
    with pytest.raises(TrajectoryFormatError, match=r"steps\[0\].text: contains a NUL character"):
        parse_trajectory(obj)
