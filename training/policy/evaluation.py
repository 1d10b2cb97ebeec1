"""Rubric success of a policy on tasks, greedy and at temperature 1 (plain Python and torch)."""
from __future__ import annotations


def success_rates(model, tokenizer, browser, tasks, *, batch_size: int = 64) -> dict:
    """Rubric success on tasks, greedy and sampled at temperature 1."""
    from training.policy.rollout import RolloutConfig, rollout

    figures = {}
    for name, temperature in (("greedy", 0.0), ("t1", 1.0)):
        episodes = rollout(model, tokenizer, browser, tasks, RolloutConfig(temperature=temperature,
                                                                            batch_size=batch_size))
        n = len(episodes)
        rate = sum(e.outcome.correct for e in episodes) / n
        figures[name] = {
            "success": rate,
            "stderr": (rate * (1 - rate) / n) ** 0.5,
            "quote_support": sum(e.outcome.quote_support for e in episodes) / n,
            "mean_steps": sum(e.outcome.steps for e in episodes) / n,
            "tool_errors_per_episode": sum(e.outcome.tool_errors for e in episodes) / n,
            "tasks": n,
        }
    return figures
