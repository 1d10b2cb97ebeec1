"""Rubric success of a policy on tasks, greedy and at temperature 1 (plain Python and torch)."""

from __future__ import annotations

from training.evaluation.metrics import mean_figures
from training.policy.limits import MAX_ACTION_TOKENS


def success_rates(
    model, tokenizer, runner, tasks, *, batch_size: int = 64, chat=None, max_action_tokens: int = MAX_ACTION_TOKENS
) -> dict:
    """Rubric figures on tasks (training/evaluation/metrics.py), greedy and sampled at temperature 1."""
    # Lazy: training.policy.rollout loads torch, which the web process (it imports this module) never does.
    from training.policy.rollout import RolloutConfig, rollout

    figures = {}
    for name, temperature in (("greedy", 0.0), ("t1", 1.0)):
        episodes = rollout(
            model,
            tokenizer,
            runner,
            tasks,
            RolloutConfig(temperature=temperature, batch_size=batch_size, max_action_tokens=max_action_tokens),
            chat=chat,
        )
        n = len(episodes)
        means = mean_figures(episodes)
        figures[name] = {**means, "stderr": (means["success"] * (1 - means["success"]) / n) ** 0.5, "tasks": n}
    return figures
