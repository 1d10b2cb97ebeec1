"""pass@k: the chance that at least one of k samples of a task is right (plain Python).

From n samples of a task of which c are right, the unbiased estimator of Chen et al. (2021,
"Evaluating Large Language Models Trained on Code"): 1 - C(n-c, k) / C(n, k), the chance that k
samples drawn without replacement from the n are not all wrong. Drawing n >= k samples and
estimating is less noisy than drawing exactly k. Beside pass@1, pass@k tells learning apart
from sharpening: a policy that only concentrates on what it could already sample raises
pass@1 and leaves pass@16 flat; one that learnt a move it could not make raises both.

Exact in integers (`math.comb`), so it holds for any n. The pass@k of a set of tasks is the
mean of its tasks' (benchmarks/loop_heldout.py, benchmarks/reachability.py).
"""

from __future__ import annotations

import math


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one task from `n` samples of which `c` are right (0 <= c <= n,
    1 <= k <= n): 1 - C(n-c, k) / C(n, k); 1 when fewer than k samples are wrong."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n samples, not k={k} of n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"right samples: 0 to n={n}, not {c}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)
