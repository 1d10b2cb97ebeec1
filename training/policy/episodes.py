"""An episode as a conversation with its tokens, and the pieces every way of playing one shares
(plain Python, no torch): carrying out one turn of the policy (`act`), playing a scripted
agent's turns for behaviour cloning (`play_scripted`), and building the tokens of a finished
episode exactly as a rollout builds them (`episode_tokens`). The batched, sampled rollout
itself is training/policy/rollout.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from training.envs.base import INVALID_TOOL, EnvTask, Episode, EpisodeRunner, Rubric
from training.policy.chat import ChatFormat
from training.policy.conversations import conversation_tokens
from training.policy.parsers import ToolCall


@dataclass
class RolloutEpisode:
    task: EnvTask
    episode: Episode
    messages: list[dict] = field(default_factory=list)
    opening: int = 0  # how many of the messages are the environment's opening ones
    ids: list[int] = field(default_factory=list)
    agent_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    outcome: Rubric | None = None

    @property
    def agent_tokens(self) -> int:
        return sum(self.agent_mask)

    @property
    def steps(self) -> list[dict]:
        """The canonical steps (actions with structured arguments, observations, the answer)."""
        return self.episode.record.steps

    def extend(self, tokens: list[int], *, agent: bool, logprobs: list[float] | None = None) -> None:
        self.ids += tokens
        self.agent_mask += [int(agent)] * len(tokens)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(tokens)

    def trajectory(self, *, agent: str, version: str = "") -> dict:
        """The episode in the canonical form, as an imported transcript of it would be stored."""
        trajectory = self.episode.trajectory(agent=agent, version=version)
        trajectory["metadata"]["agent_tokens"] = self.agent_tokens
        return trajectory


def new_episode(runner: EpisodeRunner, task: EnvTask) -> RolloutEpisode:
    messages = runner.env.opening_messages(task)
    return RolloutEpisode(task=task, episode=runner.start(task), messages=messages, opening=len(messages))


def play_scripted(runner: EpisodeRunner, task: EnvTask, turns, parser) -> RolloutEpisode:
    """An episode whose turns come from a scripted agent (`Environment.demonstrator`), each
    written as the policy writes it (`parser.format`) and carried out as a rollout would."""
    e = new_episode(runner, task)
    answer_tool = "answer" if "answer" in runner.tools else None
    for turn in turns(task, e.episode.state):
        if e.episode.done:
            break
        text = turn if isinstance(turn, str) else parser.format([ToolCall(*turn)])
        e.messages.append({"role": "assistant", "content": text})
        act(e, parser, text, answer_tool)
    e.outcome = e.episode.outcome()
    return e


def episode_tokens(chat: ChatFormat, e: RolloutEpisode, tools: list[dict]) -> tuple[list[int], list[int]]:
    """(ids, agent_mask) of a finished episode's messages, built exactly as a rollout builds
    them: each assistant turn is agent tokens (its text and the end-of-turn token), the rest
    is context."""
    return conversation_tokens(chat, e.messages, e.opening, tools)


def _tool_message(call_id: str, name: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def act(e: RolloutEpisode, parser, text: str, answer_tool: str | None) -> int:
    """Carry out the calls of one turn; returns how many tool messages it added.

    A turn of plain text is the final answer (as in chat APIs) when the environment has an
    answer tool; a turn that cannot be read, or plain text without one, is an error result."""
    turn = parser.parse(text)
    calls, problem = list(turn.calls), turn.problem
    if not problem and not calls:
        if answer_tool and turn.content.strip():
            key = next(iter(e.episode.runner.tools[answer_tool].parameters.get("properties", {})), "text")
            calls = [ToolCall(answer_tool, {key: turn.content.strip()})]
        else:
            problem = "no tool call; call one of the tools, or answer."
    if problem:
        call_id = f"call_{e.episode.record.calls}"
        result = e.episode.refuse(text, problem, call_id=call_id)
        e.messages.append(_tool_message(call_id, INVALID_TOOL, result.content))
        return 1
    if turn.calls:
        e.episode.think(turn.content)
    added = 0
    start = len(e.episode.record.steps)
    for call in calls:
        if e.episode.done:
            break
        call_id = f"call_{e.episode.record.calls}"
        result = e.episode.call(call.name, call.arguments, call_id=call_id)
        if not result.done:
            e.messages.append(_tool_message(call_id, call.name, result.content))
            added += 1
    _one_turn(e.episode.record.steps, start)
    return added


def _one_turn(steps: list[dict], start: int) -> None:
    """The steps of one turn's calls recorded as the policy wrote them, as an imported transcript
    has them: the calls in their order, then their results in the same order (each tied to its
    call by `call_id`), then the answer if the turn gave it. The runner records each call with its
    result; two calls in a turn would otherwise read back as two turns."""
    turn = steps[start:]
    actions = [s for s in turn if s.get("kind") == "action"]
    if len(actions) < 2:
        return
    observations = [s for s in turn if s.get("kind") == "observation"]
    rest = [s for s in turn if s.get("kind") not in ("action", "observation")]
    steps[start:] = actions + observations + rest
