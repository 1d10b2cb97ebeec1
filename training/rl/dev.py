"""The dev tasks an RL run's checkpoints are judged on (plain Python, no Django).

One rule for the app's RL runs (training/rl/services.py), the loop's plan and the benchmarks:
the dev environment given, else the environment's fresh variant where it has one (a world no
RL step trains on), else the environment itself; its tasks are a fixed random sample.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from training.envs.registry import variant_of


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
