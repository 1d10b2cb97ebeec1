"""The one interval of Arbiter's figures (plain Python and numpy): a 95% percentile bootstrap
over units (tasks, or pairs), seeded, so the same values always give the same interval. The
evaluation's success, RL's dev checkpoints and the reward model's accuracy all come from here.
"""

from __future__ import annotations

RESAMPLES = 1000  # bootstrap resamples of every interval
_CHUNK = 100  # resamples drawn at a time, so memory stays small for large sets


def bootstrap(units, *, resamples: int = RESAMPLES, seed: int = 0) -> dict:
    """The one interval of Arbiter's figures: the mean over units (tasks, or pairs) of each
    unit's mean, with a 95% percentile-bootstrap interval over units. `units` is a list of
    lists (a task's episodes) or of numbers (one value per unit).

    {mean, low, high, units, values}; the means of an empty set are None."""
    import numpy as np

    groups = [u if isinstance(u, (list, tuple)) else [u] for u in units]
    means = np.array([float(np.mean(g)) for g in groups if len(g)], dtype=float)
    if means.size == 0:
        return {"mean": None, "low": None, "high": None, "units": 0, "values": 0}
    rng = np.random.default_rng(seed)
    draws = []
    for start in range(0, resamples, _CHUNK):
        rows = min(_CHUNK, resamples - start)
        draws.append(means[rng.integers(0, means.size, size=(rows, means.size))].mean(axis=1))
    low, high = np.percentile(np.concatenate(draws), [2.5, 97.5])
    return {
        "mean": float(means.mean()),
        "low": float(low),
        "high": float(high),
        "units": int(means.size),
        "values": int(sum(len(g) for g in groups)),
    }


def bootstrap_interval(values, *, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """The (low, high) of `bootstrap` over one value per unit (a pair's credit, say)."""
    result = bootstrap([float(v) for v in values], resamples=resamples, seed=seed)
    return result["low"], result["high"]
