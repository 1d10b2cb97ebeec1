"""Episode metrics, one vocabulary for every stage (plain Python).

Every figure of an episode, wherever it is reported (behaviour cloning's check, PPO's
batches and dev evaluations, best-of-n, the before/after evaluation), comes from here:

    success      the rubric says the answer is correct (0 or 1)
    utility      the rubric's utility (one number, higher is better)
    steps        tool calls made, an invalid turn counting as one
    tool_errors  calls that gave an error result
    loop         the episode ended repeating one call
    truncated    the episode ran out of steps or context
    agent_tokens tokens the policy generated (when the episode has them)
    + any other number among the rubric's parts, under its own name (the encyclopedia's
      f1 and quote_support, say)
"""

from __future__ import annotations

STANDARD = ("success", "utility", "steps", "tool_errors", "loop", "truncated")
GREEDY_SUCCESS = "greedy_success"  # success of the greedy episodes, wherever it is reported beside sampled success
# The figures that are shares of episodes (each 0 or 1): their intervals are at least Wilson's
# (core.intervals); a count such as steps is not one, even where every episode took one step.
SHARES = ("success", GREEDY_SUCCESS, "loop", "truncated")


def episode_figures(episode) -> dict[str, float]:
    """The figures of one finished rollout episode (its `outcome` is a rubric)."""
    outcome = episode.outcome
    figures = {"success": float(outcome.correct), "utility": float(outcome.utility)}
    for name, value in outcome.parts.items():
        if isinstance(value, bool | int | float) and name not in figures:
            figures[name] = float(value)
    if getattr(episode, "agent_mask", None):
        figures["agent_tokens"] = float(episode.agent_tokens)
    return figures


def mean_figures(episodes) -> dict[str, float]:
    """Each figure's mean over the episodes (a figure some episodes lack is averaged over those that have it)."""
    return mean_of_figures([episode_figures(episode) for episode in episodes])


def mean_of_figures(rows: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's mean over the rows (name -> value) that have it."""
    sums: dict[str, list[float]] = {}
    for row in rows:
        for name, value in row.items():
            sums.setdefault(name, []).append(value)
    return {name: sum(values) / len(values) for name, values in sums.items()}


def measured(metrics: list[str], figures: list[dict]) -> list[str]:
    """The metrics (in their order) that at least one of `figures` (metric -> a number or an
    interval {"mean": ...}) has a value for: a table shows the columns of its environment, not
    the encyclopedia's F1 and quote support everywhere."""

    def has(value) -> bool:
        return value is not None and (not isinstance(value, dict) or value.get("mean") is not None)

    return [m for m in metrics if any(has(f.get(m)) for f in figures)]
