"""Inter-annotator agreement on the 5-point scale (plain Python).

- Krippendorff's alpha with the ordinal metric over the five points (1 = A much better,
  3 = tie, 5 = B much better): ties are the middle of the scale, so a tie against a
  "better" is a small disagreement and against a "much better" on the other side a large one.
- Pairwise agreement as WebGPT and InstructGPT report it (about 73% between labelers),
  over all pairs of votes on the same comparison, with ties handled three ways, all
  reported: `with_ties` (a tie is its own class), `excluding_ties` (pairs with a tie
  dropped), `tie_as_half` (WebGPT's soft label: a tie is a 50% preference, so a tie
  agrees half with anything).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import combinations

from core.votes import direction


def _soft(choice: int) -> float:
    """P(A is better) as a soft label."""
    return {-1: 1.0, 0: 0.5, 1: 0.0}[direction(choice)]


def krippendorff_alpha_ordinal(units: list[list[int]], values: range = range(1, 6)) -> float | None:
    """Alpha over units (each the list of votes on one comparison); None if undefined."""
    coincidence: Counter = Counter()
    for votes in units:
        m = len(votes)
        if m < 2:
            continue
        for i, c in enumerate(votes):
            for j, k in enumerate(votes):
                if i != j:
                    coincidence[(c, k)] += 1 / (m - 1)
    totals = Counter()
    for (c, _), w in coincidence.items():
        totals[c] += w
    n = sum(totals.values())
    if n <= 1:
        return None
    vals = list(values)

    def delta2(c: int, k: int) -> float:
        lo, hi = min(c, k), max(c, k)
        between = sum(totals[g] for g in vals if lo <= g <= hi)
        return (between - (totals[c] + totals[k]) / 2) ** 2

    observed = sum(w * delta2(c, k) for (c, k), w in coincidence.items())
    expected = sum(totals[c] * totals[k] * delta2(c, k) for c in vals for k in vals)
    if expected == 0:
        return None  # every vote the same value: agreement is perfect but alpha undefined
    return 1 - (n - 1) * observed / expected


@dataclass(frozen=True)
class PairwiseAgreement:
    pairs: int
    with_ties: float | None
    excluding_ties: float | None
    pairs_without_ties: int
    tie_as_half: float | None


def pairwise_agreement(units: list[list[int]]) -> PairwiseAgreement:
    pairs = agree = strict_pairs = strict_agree = 0
    soft = 0.0
    for votes in units:
        for a, b in combinations(votes, 2):
            da, db = direction(a), direction(b)
            pairs += 1
            agree += da == db
            pa, pb = _soft(a), _soft(b)
            soft += pa * pb + (1 - pa) * (1 - pb)  # 0.5 whenever either side is a tie
            if da != 0 and db != 0:
                strict_pairs += 1
                strict_agree += da == db
    return PairwiseAgreement(
        pairs=pairs,
        with_ties=agree / pairs if pairs else None,
        excluding_ties=strict_agree / strict_pairs if strict_pairs else None,
        pairs_without_ties=strict_pairs,
        tie_as_half=soft / pairs if pairs else None,
    )
