"""How far to trust a judge (a reward model, a rubric, a chat model) that votes on comparisons.

Pure Python and numpy, no Django: the selectors build one `ComparisonVotes` row per comparison
the judge answered, and the quality page and the API show what these functions return. All
figures are in direction terms (`core.votes.direction`): -1 prefers A, 0 tie, +1 B.

- `judge_agreement`: the judge against the human majority (accuracy and Cohen's kappa over the
  three directions), the human ceiling (each human against the majority of the other humans)
  beside the judge on the same comparisons, and the judge week by week. A rating dimension
  ("helpful", ...) can stand in for the overall choice.
- `position_bias`: how often the answer changes when the sides are swapped, and how often the
  judge picks whichever side it was shown first.
- `self_consistency`: how often the judge gives the same answer when asked again.

Every figure comes with a percentile bootstrap interval over comparisons, and a share's
(accuracy, flip rate, first-shown rate, agreement) is widened to at least its Wilson interval
(`core.intervals.share_bounds`), so 0 of 10 never reads as [0, 0]. Each comparison is
reduced once to a short vector of counts (a 3x3 confusion, say); a resample sums the vectors of
the drawn comparisons, so 20,000 comparisons x 1000 resamples takes about a second.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from core.intervals import percentile_interval, resampled_totals, share_bounds
from core.votes import direction, majority

OVERALL = "overall"


@dataclass(frozen=True)
class ComparisonVotes:
    """What the humans and the judge said about one comparison the judge answered."""

    comparison_id: int
    human: tuple[int, ...]  # the human votes, choices 1..5 in A/B terms
    week: str = ""  # ISO week ("2026-W48") of the comparison's latest human vote
    judge: int | None = None  # the judge's first answer (choice 1..5)
    swapped: int | None = None  # its answer with the sides swapped, already mapped back to A/B terms
    repeat: int | None = None  # its second answer, asked the same way again
    human_ratings: tuple[dict, ...] = ()  # per human vote: {dimension: {"A": int, "B": int}}
    judge_ratings: dict | None = None  # {dimension: {"A": int, "B": int}}


@dataclass(frozen=True)
class Interval:
    """A figure and its bootstrap interval; all None where the figure is undefined."""

    value: float | None
    low: float | None
    high: float | None
    n: int | None = field(default=None, compare=False)  # the rows resampled (below 10 no interval is shown)


@dataclass(frozen=True)
class Figures:
    """Accuracy and Cohen's kappa over `n` comparisons."""

    n: int
    accuracy: Interval
    kappa: Interval


@dataclass(frozen=True)
class WeekFigures:
    week: str
    figures: Figures


@dataclass(frozen=True)
class JudgeAgreement:
    dimension: str
    vs_humans: Figures  # the judge against the human majority
    ceiling: Figures  # each human vote against the majority of the others (n: comparisons)
    judge_on_ceiling: Figures  # the judge against the majority on exactly the ceiling's comparisons
    by_week: list[WeekFigures]  # `vs_humans` per week, weeks sorted


@dataclass(frozen=True)
class PositionBias:
    n: int  # comparisons asked both ways
    flip_rate: Interval  # share whose direction changed when the sides were swapped
    first_shown_n: int  # non-tie answers of both asks
    first_shown_rate: Interval  # share of those that picked the side shown first; 0.5 is no preference


@dataclass(frozen=True)
class SelfConsistency:
    n: int  # comparisons asked twice the same way
    agreement: Interval
    kappa: Interval


# --- Confusions: 3x3 counts of (rater, reference) directions, flattened row by row --------------


def _confusion(pairs: Iterable[tuple[int, int]]) -> list[int]:
    counts = [0] * 9
    for rater, reference in pairs:
        counts[3 * (rater + 1) + (reference + 1)] += 1
    return counts


def _kappa(counts: list[int]) -> float | None:
    total = sum(counts)
    rows = [sum(counts[i : i + 3]) for i in (0, 3, 6)]
    columns = [sum(counts[j::3]) for j in range(3)]
    # Observed and chance agreement, both scaled by total**2 so the "chance is 1" test is exact.
    observed = (counts[0] + counts[4] + counts[8]) * total
    expected = sum(r * c for r, c in zip(rows, columns))
    if expected == total * total:  # one class on both sides (or no pairs): kappa is 0/0
        return None
    return (observed - expected) / (total * total - expected)


def cohen_kappa(pairs: list[tuple[int, int]]) -> float | None:
    """Cohen's kappa over pairs of directions (-1, 0, +1); None if chance agreement is 1 or no pairs."""
    return _kappa(_confusion(pairs))


# --- Directions -----------------------------------------------------------------


def _rating_direction(ratings: dict | None, dimension: str) -> int | None:
    sides = (ratings or {}).get(dimension) or {}
    a, b = sides.get("A"), sides.get("B")
    if a is None or b is None:
        return None
    return (b > a) - (b < a)


def _directions(row: ComparisonVotes, dimension: str) -> tuple[list[int], int | None]:
    """The human directions that count for `dimension`, and the judge's (None if it gave none)."""
    if dimension == OVERALL:
        judge = None if row.judge is None else direction(row.judge)
        return [direction(c) for c in row.human], judge
    humans = [d for ratings in row.human_ratings if (d := _rating_direction(ratings, dimension)) is not None]
    return humans, _rating_direction(row.judge_ratings, dimension)


def _leave_one_out(humans: list[int]) -> list[tuple[int, int]]:
    """(vote, majority of the other votes) for each vote that has other votes."""
    pairs = []
    for i, vote in enumerate(humans):
        others = majority(humans[:i] + humans[i + 1 :])
        if others is not None:
            pairs.append((vote, others))
    return pairs


def dimensions_in(rows: Iterable[ComparisonVotes]) -> list[str]:
    """The dimensions to offer: "overall" first, then every dimension the judge rated, sorted."""
    found = {dimension for row in rows for dimension in row.judge_ratings or {}}
    return [OVERALL, *sorted(found - {OVERALL})]


# --- Bootstrap ---------------------------------------------------------------------------------


def _bootstrap(
    counts: list[list[int]],
    statistics: list[Callable[[np.ndarray], np.ndarray]],
    *,
    resamples: int,
    seed: int,
    confidence: float,
    trials: list[int | None] | None = None,
) -> list[Interval]:
    """Each statistic of the summed counts, with a percentile interval from resampling the rows.
    `trials`: for each statistic that is a share, its number of trials (its interval is then at
    least the Wilson interval over them); None for one that is not (kappa).

    `counts` holds one vector of additive counts per comparison. A statistic takes a 2-D array of
    summed counts (one row per resample) and gives one value per row, NaN where it is undefined
    (kappa when chance agreement is 1); those resamples are left out of its interval. The
    resamples are core.intervals.resampled_totals, the project's one resampling.
    """
    if not counts:
        return [Interval(None, None, None, 0) for _ in statistics]
    table = np.array(counts, dtype=np.int64)
    n = len(table)
    point = table.sum(axis=0, keepdims=True)
    values = [_scalar(statistic(point)[0]) for statistic in statistics]
    totals = resampled_totals(table, resamples=resamples, seed=seed)
    intervals = []
    for value, statistic, n_trials in zip(values, statistics, trials or [None] * len(statistics)):
        found = statistic(totals)
        found = found[~np.isnan(found)]
        if value is None or not len(found):
            intervals.append(Interval(value, None, None, n))
            continue
        low, high = percentile_interval(found, confidence=confidence)
        if n_trials:
            low, high = share_bounds(value, n_trials, low, high)
        intervals.append(Interval(value, low, high, n))
    return intervals


def _scalar(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _ratios(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """part / whole per row, NaN where whole is 0 (integers to float64 exactly, below 2**53)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(whole != 0, part / np.where(whole != 0, whole, 1), np.nan)


def _accuracies(totals: np.ndarray) -> np.ndarray:
    """The share on the diagonal of each row of summed 3x3 confusions."""
    return _ratios(totals[:, 0] + totals[:, 4] + totals[:, 8], totals.sum(axis=1))


def _kappas(totals: np.ndarray) -> np.ndarray:
    """`_kappa` of each row of summed 3x3 confusions, the same integer arithmetic."""
    total = totals.sum(axis=1)
    rows = totals.reshape(-1, 3, 3).sum(axis=2)
    columns = totals.reshape(-1, 3, 3).sum(axis=1)
    observed = (totals[:, 0] + totals[:, 4] + totals[:, 8]) * total
    expected = (rows * columns).sum(axis=1)
    chance = total * total
    return _ratios(observed - expected, chance - expected)  # 0 where chance agreement is 1: undefined


def _figures(confusions: list[list[int]], **bootstrap) -> Figures:
    accuracy, kappa = _bootstrap(confusions, [_accuracies, _kappas], trials=[len(confusions), None], **bootstrap)
    return Figures(n=len(confusions), accuracy=accuracy, kappa=kappa)


# --- The figures -------------------------------------------------------------------------------


def judge_agreement(
    rows: Iterable[ComparisonVotes],
    *,
    dimension: str = OVERALL,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> JudgeAgreement:
    """The judge against the human majority, the human ceiling, and the judge week by week.

    A comparison counts where people voted and the judge answered (for a dimension: where the
    judge rated it; human votes without that rating are left out). The human label is the one
    majority rule of `core.votes`, the label the reward model learns from.
    """
    bootstrap = {"resamples": resamples, "seed": seed, "confidence": confidence}
    vs_humans, ceiling, judge_on_ceiling = [], [], []
    weeks = defaultdict(list)
    for row in rows:
        humans, judge = _directions(row, dimension)
        label = majority(humans)
        if judge is None or label is None:
            continue
        judged = _confusion([(judge, label)])
        vs_humans.append(judged)
        weeks[row.week].append(judged)
        loo = _leave_one_out(humans)
        if loo:  # at least two votes
            ceiling.append(_confusion(loo))
            judge_on_ceiling.append(judged)
    return JudgeAgreement(
        dimension=dimension,
        vs_humans=_figures(vs_humans, **bootstrap),
        ceiling=_figures(ceiling, **bootstrap),
        judge_on_ceiling=_figures(judge_on_ceiling, **bootstrap),
        by_week=[WeekFigures(week, _figures(weeks[week], **bootstrap)) for week in sorted(weeks)],
    )


def position_bias(
    rows: Iterable[ComparisonVotes], *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> PositionBias:
    """Flip rate and first-shown rate over the comparisons the judge answered both ways.

    In the first ask A is shown first (direction -1 picks it); in the swapped ask B is (its
    answer is already in A/B terms, so +1 picks the side shown first).
    """
    counts = []
    for row in rows:
        if row.judge is None or row.swapped is None:
            continue
        first, second = direction(row.judge), direction(row.swapped)
        picked_first_shown = int(first == -1) + int(second == 1)
        non_tie = int(first != 0) + int(second != 0)
        counts.append([int(first != second), 1, picked_first_shown, non_tie])
    flip_rate, first_shown_rate = _bootstrap(
        counts,
        [lambda t: _ratios(t[:, 0], t[:, 1]), lambda t: _ratios(t[:, 2], t[:, 3])],
        trials=[len(counts), sum(c[3] for c in counts)],
        resamples=resamples,
        seed=seed,
        confidence=confidence,
    )
    return PositionBias(
        n=len(counts),
        flip_rate=flip_rate,
        first_shown_n=sum(c[3] for c in counts),
        first_shown_rate=first_shown_rate,
    )


def self_consistency(
    rows: Iterable[ComparisonVotes], *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> SelfConsistency:
    """Agreement and kappa between the judge's first and repeated answers (same direction)."""
    confusions = [
        _confusion([(direction(row.judge), direction(row.repeat))])
        for row in rows
        if row.judge is not None and row.repeat is not None
    ]
    agreement, kappa = _bootstrap(
        confusions,
        [_accuracies, _kappas],
        trials=[len(confusions), None],
        resamples=resamples,
        seed=seed,
        confidence=confidence,
    )
    return SelfConsistency(n=len(confusions), agreement=agreement, kappa=kappa)
