"""The rubric's utility of an episode, the one formula every environment scores with: points for
a correct answer, a cost for each step, each tool error and a loop (WebGPT's habit of weighing
the answer against the effort). The encyclopedia's rubric, the arithmetic, codeword and MCP
environments and the simulated annotators' preferences all read it here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RubricWeights:
    correct: float = 10.0
    step: float = -1.0
    tool_error: float = -5.0
    loop: float = -10.0


def utility(
    *, correct: bool, steps: int, tool_errors: int, loop: bool, weights: RubricWeights = RubricWeights()
) -> float:
    """correct·10 − steps − 5·tool errors − 10·loop, at the default weights."""
    return float(
        weights.correct * correct + weights.step * steps + weights.tool_error * tool_errors + weights.loop * loop
    )


def episode_utility(correct: bool, episode, weights: RubricWeights = RubricWeights()) -> float:
    """`utility` of an EpisodeRecord (training/envs/base.py): its calls are its steps."""
    return utility(
        correct=correct, steps=episode.calls, tool_errors=episode.tool_errors, loop=episode.loop, weights=weights
    )
