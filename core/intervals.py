"""The intervals of Arbiter's figures (plain Python and numpy).

- `bootstrap`: a 95% percentile bootstrap over units (tasks, or pairs), seeded, so the same
  values always give the same interval. The evaluation's success, RL's dev checkpoints and the
  reward model's accuracy all come from here.
- `resampled_totals`: the one resampling of the project: the rows of a table of additive counts
  summed over each resample. `bootstrap` and the judges' agreement figures
  (annotate/judges/agreement.py, whose statistics are of 3x3 confusions) both draw through it.
- `share_interval`: the 95% Wilson score interval of a share (k of n). A percentile bootstrap
  of a share is certainty it does not have at all-or-none outcomes: 0 of 10 resamples to
  [0, 0] every time. Wilson's interval is honest there (0 of 10: [0, 27.8%]), so every
  share's interval is at least Wilson's: `bootstrap` widens itself to it when its values are
  shares (each 0, 1, or 1/2 for a tie counted as half), and the judges' agreement figures do
  the same through `share_bounds`. tests/core/test_intervals.py checks that no other module
  draws a percentile of its own.
"""

from __future__ import annotations

import math

RESAMPLES = 1000  # bootstrap resamples of every interval
DRAWN_CELLS = 2_000_000  # resamples drawn at once: at most this many drawn indices in memory
Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval
_SHARE_VALUES = (0.0, 0.5, 1.0)  # the values of a share's units: failure, a tie counted as half, success


def share_interval(successes: float, n: int) -> tuple[float | None, float | None]:
    """The 95% Wilson score interval of `successes` out of `n` (a tie may count as half), as
    (low, high); (None, None) when n is 0. 0 of 10 gives (0, 0.278), 10 of 10 (0.722, 1)."""
    if n <= 0:
        return None, None
    p = min(max(successes / n, 0.0), 1.0)
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def share_bounds(share: float, n: int, low: float | None, high: float | None) -> tuple[float | None, float | None]:
    """A resampled interval (`low`, `high`) of a share over `n` units, widened to at least the
    Wilson interval of that share over the units: a bootstrap never reads as more certain than
    the share's own interval."""
    wilson_low, wilson_high = share_interval(share * n, n)
    if wilson_low is None:
        return low, high
    return (
        wilson_low if low is None else min(low, wilson_low),
        wilson_high if high is None else max(high, wilson_high),
    )


def _is_share(groups: list) -> bool:
    return all(float(v) in _SHARE_VALUES for g in groups for v in g)


def resampled_totals(table, *, resamples: int = RESAMPLES, seed: int = 0):
    """`table` (one row of additive figures per unit: a mean, a 3x3 confusion) summed over each of
    `resamples` resamples of its rows with replacement: an array (resamples, columns). Seeded:
    numpy's generator draws the same rows whatever the block size. Resamples are drawn and summed
    a block at a time (how often each row was drawn, times the table), never one by one in Python."""
    import numpy as np

    table = np.asarray(table)
    n = len(table)
    rng = np.random.default_rng(seed)
    blocks = []
    block = max(1, DRAWN_CELLS // max(n, 1))
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        drawn = rng.integers(0, n, (rows, n)) + n * np.arange(rows)[:, None]
        blocks.append(np.bincount(drawn.ravel(), minlength=rows * n).reshape(rows, n) @ table)
    return np.concatenate(blocks) if blocks else np.zeros((0, table.shape[1]), dtype=table.dtype)


def percentile_interval(resampled, *, confidence: float = 0.95) -> tuple[float, float]:
    """The central `confidence` interval of a figure's resampled values (low, high)."""
    import numpy as np

    tail = (1 - confidence) / 2
    low, high = np.quantile(np.asarray(resampled, dtype=float), [tail, 1 - tail])
    return float(low), float(high)


def bootstrap(units, *, resamples: int = RESAMPLES, seed: int = 0, share: bool | None = None) -> dict:
    """The mean over units (tasks, or pairs) of each unit's mean, with a 95% percentile-bootstrap
    interval over units. `units` is a list of lists (a task's episodes) or of numbers (one value
    per unit). A share's interval is widened to at least the Wilson interval of the mean over the
    units (`share_bounds`): a task's episodes are not independent, so the units, not the
    episodes, are the trials. `share`: True for a share, False for a figure that is not one (a
    count, a difference), None to take every figure whose values are all 0, 1 or 1/2 as a share.

    {mean, low, high, units, values}; the means of an empty set are None."""
    import numpy as np

    groups = [u if isinstance(u, (list, tuple)) else [u] for u in units]
    groups = [g for g in groups if len(g)]
    means = np.array([float(np.mean(g)) for g in groups], dtype=float)
    if means.size == 0:
        return {"mean": None, "low": None, "high": None, "units": 0, "values": 0}
    totals = resampled_totals(means[:, None], resamples=resamples, seed=seed)[:, 0]
    low, high = percentile_interval(totals / means.size)
    mean = float(means.mean())
    if share or (share is None and _is_share(groups)):
        low, high = share_bounds(mean, int(means.size), low, high)
    return {
        "mean": mean,
        "low": low,
        "high": high,
        "units": int(means.size),
        "values": int(sum(len(g) for g in groups)),
    }


def bootstrap_interval(values, *, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """The (low, high) of `bootstrap` over one value per unit (a pair's credit, say)."""
    result = bootstrap([float(v) for v in values], resamples=resamples, seed=seed)
    return result["low"], result["high"]
