"""Judge agreement statistics against hand-computed values (no database)."""

import random

import pytest

from annotate.judges.agreement import (
    ComparisonVotes,
    Interval,
    cohen_kappa,
    dimensions_in,
    judge_agreement,
    position_bias,
    self_consistency,
)
from core.intervals import share_interval
from core.votes import majority_of_choices

EMPTY = Interval(None, None, None)


def votes(i, human, judge=None, **fields):
    return ComparisonVotes(comparison_id=i, human=tuple(human), judge=judge, **fields)


def noisy_rows(n, *, seed, right=0.7):
    """Comparisons with three agreeing humans and a judge that matches them with probability `right`."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        choice = rng.choice([1, 3, 5])
        judge = choice if rng.random() < right else rng.choice([c for c in (1, 3, 5) if c != choice])
        rows.append(votes(i, [choice] * 3, judge))
    return rows


# --- Cohen's kappa -----------------------------------------------------------------------------


def test_kappa_of_perfect_agreement_is_one():
    assert cohen_kappa([(-1, -1), (0, 0), (1, 1), (1, 1)]) == pytest.approx(1.0)


def test_kappa_at_chance_level_is_zero():
    # Every combination once: observed 3/9 equals chance (3 * 3 * 3) / 81 = 1/3.
    assert cohen_kappa([(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1)]) == pytest.approx(0.0)
    rng = random.Random(0)
    independent = [(rng.choice([-1, 0, 1]), rng.choice([-1, 0, 1])) for _ in range(20000)]
    assert abs(cohen_kappa(independent)) < 0.02


def test_kappa_on_a_worked_three_class_example():
    # (rater, reference): (-1,-1) x4, (0,0) x1, (1,1) x2, (-1,0), (1,-1), (0,1).
    # Observed 7/10. Rater marginals -1:5, 0:2, 1:3; reference -1:5, 0:2, 1:3.
    # Chance (25 + 4 + 9) / 100 = 0.38; kappa (0.7 - 0.38) / (1 - 0.38) = 0.32 / 0.62 = 16/31.
    pairs = [(-1, -1)] * 4 + [(0, 0)] + [(1, 1)] * 2 + [(-1, 0), (1, -1), (0, 1)]
    assert cohen_kappa(pairs) == pytest.approx(16 / 31)


def test_kappa_is_undefined_when_chance_agreement_is_one():
    assert cohen_kappa([(1, 1), (1, 1)]) is None
    assert cohen_kappa([]) is None


# --- Human majority and the judge against it ---------------------------------------------------


def test_the_human_label_is_the_one_majority_rule():
    assert majority_of_choices([1, 2, 5]) == -1  # "much better" and "better" are both A
    assert majority_of_choices([3, 3, 4]) == 0
    assert majority_of_choices([1, 5]) == 0  # A and B level: a tie, as in the dataset
    assert majority_of_choices([1, 1, 3, 3]) == -1  # A, A, tie, tie: A, as in the dataset
    assert majority_of_choices([]) is None


# Comparisons used by the ceiling tests, directions in brackets (the majority rule of core.votes):
#   1: humans A, A, B [-1, -1, +1], majority -1, judge A. Left out: each A's others are A, B, a
#      tie -> (-1, 0) twice; B's others are A, A -> (+1, -1). Three pairs, all disagreements.
#   2: humans B, B, majority +1, judge tie. Each B against the other B -> (+1, +1) twice.
#   3: one human tie, majority 0, judge tie: counts against the judge, too few humans for the ceiling.
#   4: humans A, B: majority tie, judge A. Each against the other: (-1, +1), (+1, -1).
#   5: humans A x3, judge did not answer: counts nowhere.
#   6: humans A, A, tie, majority -1, judge B. Each A's others are A, tie -> (-1, -1) twice; the
#      tie's others are A, A -> (0, -1).
CEILING_ROWS = [
    votes(1, [1, 2, 5], 1),
    votes(2, [4, 5], 3),
    votes(3, [3], 3),
    votes(4, [1, 5], 1),
    votes(5, [1, 1, 1], None),
    votes(6, [2, 2, 3], 5),
]


def test_judge_against_the_majority_skips_comparisons_the_judge_did_not_answer():
    result = judge_agreement(CEILING_ROWS)
    # Judge (-1, 0, 0, -1, +1) against majority (-1, +1, 0, 0, -1) on comparisons 1, 2, 3, 4, 6:
    # two right. Marginals -1:2, 0:2, +1:1 on both sides: chance 9/25, kappa (10-9)/(25-9).
    assert result.dimension == "overall"
    assert result.vs_humans.n == 5
    assert result.vs_humans.accuracy.value == pytest.approx(0.4)
    assert result.vs_humans.kappa.value == pytest.approx(1 / 16)


def test_ceiling_leaves_each_human_out_and_the_judge_is_scored_on_the_same_comparisons():
    result = judge_agreement(CEILING_ROWS)
    # Ceiling pairs from comparisons 1, 2, 4, 6 (ten): (+1,+1) twice and (-1,-1) twice agree.
    # Vote marginals -1:5, 0:1, +1:4; others' majority -1:5, 0:2, +1:3: chance 39/100,
    # kappa (40-39)/(100-39).
    assert result.ceiling.n == 4
    assert result.ceiling.accuracy.value == pytest.approx(0.4)
    assert result.ceiling.kappa.value == pytest.approx(1 / 61)
    # The judge on 1, 2, 4, 6 only (not 3): (-1,-1), (0,+1), (-1,0), (+1,-1). One of four;
    # marginals -1:2, 0:1, +1:1 on both sides: chance 6/16, kappa (4-6)/(16-6).
    assert result.judge_on_ceiling.n == 4
    assert result.judge_on_ceiling.accuracy.value == pytest.approx(1 / 4)
    assert result.judge_on_ceiling.kappa.value == pytest.approx(-0.2)


def test_figures_by_week_are_grouped_and_sorted():
    rows = [
        votes(1, [1, 1], 1, week="2026-W48"),
        votes(2, [5, 5], 1, week="2026-W02"),
        votes(3, [5], 5, week="2026-W10"),
        votes(4, [5, 5], 5, week="2026-W02"),
        votes(5, [1, 5], 1, week="2026-W01"),  # A and B level: a tie, which the judge missed
    ]
    by_week = judge_agreement(rows).by_week
    assert [w.week for w in by_week] == ["2026-W01", "2026-W02", "2026-W10", "2026-W48"]
    assert [w.figures.n for w in by_week] == [1, 2, 1, 1]
    assert [w.figures.accuracy.value for w in by_week] == [0.0, 0.5, 1.0, 1.0]


def test_a_dimension_takes_directions_from_ratings_and_ignores_votes_without_it():
    rows = [
        # Humans chose B overall, and so did the judge; on helpfulness they rated A higher
        # (A, tie, A) while the judge rated B higher.
        votes(
            1,
            [5, 5, 5],
            5,
            human_ratings=(
                {"helpful": {"A": 4, "B": 2}},
                {"helpful": {"A": 5, "B": 5}},
                {"helpful": {"A": 3, "B": 1}},
            ),
            judge_ratings={"helpful": {"A": 2, "B": 3}},
        ),
        # One human rated helpfulness (B); the others lack it or a side, and do not count as ties.
        votes(
            2,
            [1, 1, 1, 1],
            5,
            human_ratings=({"helpful": {"A": 1, "B": 4}}, {}, {"safe": {"A": 1, "B": 1}}, {"helpful": {"A": 3}}),
            judge_ratings={"helpful": {"A": 1, "B": 2}, "safe": {"A": 2, "B": 2}},
        ),
        # The judge did not rate helpfulness here.
        votes(3, [1], 1, human_ratings=({"helpful": {"A": 5, "B": 1}},), judge_ratings={"safe": {"A": 1, "B": 1}}),
    ]
    assert dimensions_in(rows) == ["overall", "helpful", "safe"]
    overall = judge_agreement(rows).vs_humans  # the choices: right on 1 and 3, wrong on 2
    assert (overall.n, overall.accuracy.value) == (3, pytest.approx(2 / 3))
    helpful = judge_agreement(rows, dimension="helpful")
    assert helpful.dimension == "helpful"
    assert (helpful.vs_humans.n, helpful.vs_humans.accuracy.value) == (2, 0.5)
    # Only comparison 1 has two humans rating helpfulness: each A's others (tie, A) are A, so
    # (-1, -1) twice; the tie's others (A, A) give (0, -1). Two of three agree.
    assert helpful.ceiling.n == 1
    assert helpful.ceiling.accuracy.value == pytest.approx(2 / 3)


# --- Position bias and self-consistency --------------------------------------------------------


def test_a_judge_that_always_picks_the_first_shown_side():
    # Asked plainly it picks A; asked swapped it picks what was shown first, which is B in A/B terms.
    rows = [votes(i, [1], judge, swapped=swapped) for i, (judge, swapped) in enumerate([(1, 5), (2, 4), (1, 4)])]
    result = position_bias(rows)
    assert result.n == 3 and result.first_shown_n == 6
    # All of them, but not certainty: a share's interval is at least Wilson's (issue 53).
    assert result.flip_rate == Interval(1.0, *share_interval(3, 3))
    assert result.first_shown_rate == Interval(1.0, *share_interval(6, 6))


def test_position_bias_on_a_mixed_example():
    rows = [
        votes(1, [1], 1, swapped=5),  # flip; both asks pick the first shown
        votes(2, [1], 2, swapped=4),  # flip; both first shown
        votes(3, [1], 5, swapped=5),  # steady B: second shown, then first shown
        votes(4, [1], 3, swapped=3),  # steady tie: no non-tie answer
        votes(5, [1], 3, swapped=1),  # flip; the swapped ask picks A, shown second
        votes(6, [1], 1),  # never asked swapped
    ]
    result = position_bias(rows)
    assert result.n == 5
    assert result.flip_rate.value == pytest.approx(3 / 5)
    assert result.first_shown_n == 7
    assert result.first_shown_rate.value == pytest.approx(5 / 7)


def test_self_consistency():
    rows = [
        votes(1, [1], 1, repeat=2),  # A, A
        votes(2, [1], 5, repeat=4),  # B, B
        votes(3, [1], 3, repeat=3),  # tie, tie
        votes(4, [1], 1, repeat=5),  # A, B
        votes(5, [1], 4, repeat=3),  # B, tie
        votes(6, [1], 4),  # never asked again
    ]
    result = self_consistency(rows)
    assert result.n == 5
    assert result.agreement.value == pytest.approx(3 / 5)
    # First ask -1:2, 0:1, +1:2; repeat -1:1, 0:2, +1:2: chance 8/25, kappa (15-8)/(25-8).
    assert result.kappa.value == pytest.approx(7 / 17)
    assert result.kappa.value == pytest.approx(cohen_kappa([(-1, -1), (1, 1), (0, 0), (-1, 1), (1, 0)]))


# --- Intervals and empty input -----------------------------------------------------------------


def test_intervals_contain_the_value_and_are_deterministic_for_a_seed():
    rows = noisy_rows(200, seed=1)
    first = judge_agreement(rows, resamples=300, seed=7)
    for interval in (first.vs_humans.accuracy, first.vs_humans.kappa, first.ceiling.accuracy):
        assert interval.low <= interval.value <= interval.high
    assert first.vs_humans.accuracy.low < first.vs_humans.accuracy.high
    assert judge_agreement(rows, resamples=300, seed=7) == first
    assert judge_agreement(rows, resamples=300, seed=8) != first


def test_intervals_narrow_as_comparisons_grow():
    def width(n):
        accuracy = judge_agreement(noisy_rows(n, seed=2), resamples=300).vs_humans.accuracy
        return accuracy.high - accuracy.low

    assert width(2000) < width(50) / 3


def test_a_wider_confidence_gives_a_wider_interval():
    rows = noisy_rows(200, seed=3)
    narrow = judge_agreement(rows, resamples=300, confidence=0.5).vs_humans.accuracy
    wide = judge_agreement(rows, resamples=300, confidence=0.99).vs_humans.accuracy
    assert wide.low < narrow.low and narrow.high < wide.high


def test_resamples_with_undefined_kappa_are_left_out():
    # Kappa is 1 on both comparisons together, undefined on a resample that draws only one of them.
    kappa = judge_agreement([votes(1, [1, 1], 1), votes(2, [5, 5], 5)], seed=0).vs_humans.kappa
    assert kappa == Interval(1.0, 1.0, 1.0)


def test_empty_input_gives_no_figures():
    result = judge_agreement([])
    for figures in (result.vs_humans, result.ceiling, result.judge_on_ceiling):
        assert figures.n == 0 and figures.accuracy == EMPTY and figures.kappa == EMPTY
    assert result.by_week == []
    assert position_bias([]) == position_bias([votes(1, [1], 1)])
    bias = position_bias([])
    assert (bias.n, bias.first_shown_n, bias.flip_rate, bias.first_shown_rate) == (0, 0, EMPTY, EMPTY)
    consistency = self_consistency([])
    assert (consistency.n, consistency.agreement, consistency.kappa) == (0, EMPTY, EMPTY)
    assert dimensions_in([]) == ["overall"]
    # Rows, but none the judge answered against a human majority.
    assert judge_agreement([votes(2, [], 1), votes(3, [1], None)]).vs_humans.n == 0
    assert judge_agreement([votes(1, [1], 1)], dimension="helpful").vs_humans.n == 0


def test_kappa_undefined_on_all_rows_is_none_with_no_interval():
    # Every human and the judge say A: accuracy is 1, kappa undefined.
    result = judge_agreement([votes(1, [1, 1], 1), votes(2, [2], 1)])
    assert result.vs_humans.accuracy == Interval(1.0, *share_interval(2, 2))
    assert result.vs_humans.kappa == EMPTY


def _one_by_one(counts, statistics, *, resamples, seed, confidence=0.95):
    """The bootstrap as it was written before it drew resamples a block at a time: one resample
    per Python iteration, each statistic on plain ints. Kept here as the reference."""
    import numpy as np

    table = np.array(counts, dtype=np.int64)
    rng = np.random.default_rng(seed)
    draws = [[] for _ in statistics]
    for _ in range(resamples):
        total = (np.bincount(rng.integers(0, len(table), len(table)), minlength=len(table)) @ table).tolist()
        for found, statistic in zip(draws, statistics):
            if (value := statistic(total)) is not None:
                found.append(value)
    tail = (1 - confidence) / 2
    return [
        (statistic(table.sum(axis=0).tolist()), *(float(x) for x in np.quantile(found, [tail, 1 - tail])))
        for statistic, found in zip(statistics, draws)
    ]


def _plain_accuracy(c):
    return (c[0] + c[4] + c[8]) / sum(c) if sum(c) else None


def _plain_kappa(c):
    total, rows, columns = sum(c), [sum(c[i : i + 3]) for i in (0, 3, 6)], [sum(c[j::3]) for j in range(3)]
    expected = sum(r * k for r, k in zip(rows, columns))
    return None if expected == total * total else ((c[0] + c[4] + c[8]) * total - expected) / (total**2 - expected)


@pytest.mark.parametrize("n", [3, 57, 400])
def test_the_block_bootstrap_gives_exactly_the_figures_of_one_resample_at_a_time(n, monkeypatch):
    """The quality page's intervals did not move when the bootstrap stopped looping in Python:
    the same draws, the same integer arithmetic, the same floats (blocks smaller than the
    resamples included)."""
    from annotate.judges import agreement
    from core import intervals

    monkeypatch.setattr(intervals, "DRAWN_CELLS", 7 * n)  # 7 resamples a block, 1000 in all
    rng = random.Random(n)
    counts = [[int(rng.random() < 0.3) for _ in range(9)] for _ in range(n)]
    got = agreement._bootstrap(
        counts, [agreement._accuracies, agreement._kappas], resamples=1000, seed=3, confidence=0.95
    )
    expected = _one_by_one(counts, [_plain_accuracy, _plain_kappa], resamples=1000, seed=3)
    assert [(i.value, i.low, i.high) for i in got] == expected
