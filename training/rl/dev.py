"""The dev tasks an RL run's checkpoints are judged on, and their figures (plain Python, no Django).

One rule for the app's RL runs (training/rl/services.py), the loop's plan and the benchmarks:
the dev environment given, else the environment's fresh variant where it has one (a world no
RL step trains on), else the environment itself; its tasks are a fixed random sample.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from core.intervals import bootstrap
from training.envs.registry import variant_of
from training.evaluation.metrics import GREEDY_SUCCESS, episode_figures, mean_of_figures
from training.rl.config import RLConfig


def dev_world(environment: str, dev_environment: str, size: int, *, get: Callable):
    """(the environment RL is judged in, its dev tasks); `get(name)` gives an environment by name
    (the app's registry, with the environments of its settings, or training.envs.registry's)."""
    name = dev_environment or variant_of(environment, "fresh")
    dev = get(name)
    return dev, dev_sample(dev, fresh=name != environment, size=size)


def dev_sample(env, *, fresh: bool, size: int) -> list:
    """The dev tasks checkpoints are judged on: the dev split, or every split of a fresh world
    (no RL step trains on it), as a fixed random sample of `size` (0: all), so every kind of
    question is in it whatever the tasks' order."""
    tasks = [t for split in (("train", "dev", "eval") if fresh else ("dev",)) for t in env.tasks(split)]
    if size and len(tasks) > size:
        tasks = random.Random(0).sample(tasks, size)
    return tasks


class EvaluationCancelled(Exception):
    """A cancel asked for while the dev tasks were being played (honoured between rollout chunks)."""


def dev_figures(
    model, tokenizer, runner, tasks, config: RLConfig, *, seed: int, chat=None, ranks=None, should_stop=None
) -> dict:
    """Rubric figures of the policy on the dev tasks (training/evaluation/metrics.py),
    `eval_samples` episodes per task; in a data-parallel run each process plays its share."""
    from core.ranks import Ranks
    from training.policy.rollout import RolloutConfig, rollout

    ranks = ranks or Ranks()

    def check(_fraction: float) -> None:  # one process only: ranks must all play every chunk
        if should_stop is not None and not ranks.on and should_stop():
            raise EvaluationCancelled()

    def play(temperature: float, samples: int) -> list[tuple[str, dict]]:
        """(task id, figures) of each episode, every process's, in task order."""
        repeated = [t for t in tasks for _ in range(samples)]
        mine = ranks.mine(len(repeated))
        episodes = rollout(
            model,
            tokenizer,
            runner,
            [repeated[i] for i in mine],
            RolloutConfig(
                temperature=temperature,
                batch_size=config.rollout_batch_size,
                max_action_tokens=config.max_action_tokens,
                max_context=config.max_context,
            ),
            seeds=[seed * 7 + 500_000 + i for i in mine],
            chat=chat,
            progress=check,
        )
        return ranks.gather([(e.task.external_id, episode_figures(e)) for e in episodes], mine)

    episodes = play(config.eval_temperature, config.eval_samples)
    figures = {
        **mean_of_figures([f for _, f in episodes]),
        "episodes": len(episodes),
        "temperature": config.eval_temperature,
    }
    figures["success_low"], figures["success_high"] = _interval(episodes, seed)
    if config.eval_greedy and config.eval_temperature > 0:
        greedy = play(0.0, 1)
        figures[GREEDY_SUCCESS], figures["greedy_episodes"] = (
            mean_of_figures([f for _, f in greedy])["success"],
            len(greedy),
        )
        figures["greedy_low"], figures["greedy_high"] = _interval(greedy, seed)
    return figures


def _interval(episodes: list[tuple[str, dict]], seed: int) -> tuple[float, float]:
    """The 95% interval of dev success over tasks (the one interval, core.intervals.bootstrap), from
    each episode's (task id, figures)."""
    by_task: dict[str, list[float]] = {}
    for task, figures in episodes:
        by_task.setdefault(task, []).append(figures["success"])
    result = bootstrap(list(by_task.values()), seed=seed)
    return (result["low"], result["high"]) if result["mean"] is not None else (0.0, 1.0)
