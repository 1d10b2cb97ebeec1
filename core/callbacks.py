"""How a caller watches and steers a training job (plain Python): the one callbacks protocol of
the reward model, behaviour cloning, SFT/DPO and RL. A run kind passes one `Callbacks` to the
trainer; each data-parallel rank passes rank 0's events on through `core.parallel`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def nothing(*args, **kwargs) -> None:
    """A callback that does nothing: the default of every Callbacks hook (and of RL's)."""
    return None


def _never() -> bool:
    return False


@dataclass
class Callbacks:
    """How a caller watches and steers a run; every hook does nothing unless given."""

    progress: Callable[[float, str], None] = nothing  # (fraction done, what is happening)
    metrics: Callable[[int, dict[str, float]], None] = nothing  # (global step, {"train/loss": ...})
    log: Callable[[str], None] = nothing  # one line for the run's log
    should_stop: Callable[[], bool] = _never  # checked after every step: True cancels the run
    checkpoint: Callable[[int, str], None] = nothing  # (global step, checkpoint directory) after each save


@dataclass
class RLCallbacks(Callbacks):
    """The callbacks of a run that judges and keeps policy checkpoints (RL, expert iteration;
    training/rl/checkpointed_run.py), plus one for each policy checkpoint saved."""

    policy_saved: Callable[[int, str, dict], None] = nothing  # (step, policy directory, its dev figures)
