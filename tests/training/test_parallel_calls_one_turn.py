"""A policy's turn of two tool calls is stored as one turn, as the same episode imported from a
transcript is (issue 45; docs/environments.md says rollouts and imports match): both calls, then
both results, each tied to its call; exported as one assistant message with two tool calls."""

from __future__ import annotations

from annotate.chat_messages import steps_to_messages
from annotate.trajectory_formats import parse_trajectory
from training.envs.arithmetic import ArithmeticEnvironment
from training.envs.base import EpisodeRunner
from training.envs.replay import _observation_of
from training.policy.episodes import act, new_episode
from training.policy.parsers import HermesParser


def _played():
    env = ArithmeticEnvironment(seed=11, n_tasks=60)
    runner = EpisodeRunner(env)
    task = env.tasks("train")[0]
    e = new_episode(runner, task)
    parser = HermesParser(list(runner.tools.values()))
    two_calls = (
        'Both sums first.<tool_call>{"name": "calculate", "arguments": {"expression": "1 + 1"}}</tool_call>'
        '<tool_call>{"name": "calculate", "arguments": {"expression": "2 + 3"}}</tool_call>'
    )
    assert act(e, parser, two_calls, "answer") == 2
    act(e, parser, '<tool_call>{"name": "answer", "arguments": {"text": "5"}}</tool_call>', "answer")
    return e, task


def test_two_calls_in_a_turn_are_one_turn_as_a_transcript_has_them():
    e, task = _played()
    kinds = [(s["kind"], s.get("call_id")) for s in e.steps]
    assert kinds == [
        ("thought", None),
        ("action", "call_0"),
        ("action", "call_1"),
        ("observation", "call_0"),
        ("observation", "call_1"),
        ("answer", None),
    ]
    assert [s["content"] for s in e.steps if s["kind"] == "observation"] == ["2", "5"]
    messages = steps_to_messages(e.steps)
    assistant_turns = [m for m in messages if m["role"] == "assistant" and m["tool_calls"]]
    assert len(assistant_turns) == 1 and len(assistant_turns[0]["tool_calls"]) == 2

    # The same episode logged by the agent as an OpenAI transcript is stored with the same steps.
    logged = [{"role": "user", "content": task.prompt}, *messages]
    clean = [{k: v for k, v in m.items() if v is not None} for m in logged]
    imported = parse_trajectory({"messages": clean, "task": {"external_id": task.external_id}}, format="openai")
    assert [(s["kind"], s.get("call_id")) for s in imported.steps] == kinds


def test_a_replay_meets_each_call_with_its_own_result():
    e, _ = _played()
    steps = e.steps
    first, second = steps[1], steps[2]
    assert _observation_of(first, steps[2:])["content"] == "2"
    assert _observation_of(second, steps[3:])["content"] == "5"
