"""A share's interval is honest at all-or-none outcomes (issue 53): Wilson's, never the
percentile bootstrap's [0, 0] for 0 of 10, wherever a share's interval is computed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from scipy.stats import binomtest

from annotate.judges.agreement import ComparisonVotes, judge_agreement
from core.intervals import bootstrap, bootstrap_interval, share_interval
from rewardmodel.evaluate import pair_metrics

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("k,n", [(0, 10), (10, 10), (3, 10), (1, 320), (0, 1)])
def test_share_interval_is_wilsons(k, n):
    oracle = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    low, high = share_interval(k, n)
    assert low == pytest.approx(oracle.low, abs=1e-9)
    assert high == pytest.approx(oracle.high, abs=1e-9)


def test_share_interval_of_nothing_is_none():
    assert share_interval(0, 0) == (None, None)


@pytest.mark.parametrize("outcome,low,high", [(0, 0.0, 0.2775), (1, 0.7225, 1.0)])
def test_bootstrap_of_all_or_none_is_not_certain(outcome, low, high):
    result = bootstrap([outcome] * 10)
    assert result["mean"] == outcome
    assert result["low"] == pytest.approx(low, abs=1e-4)
    assert result["high"] == pytest.approx(high, abs=1e-4)


def test_tasks_are_the_trials_of_a_share_over_episodes():
    # "0.0% [0.0%, 0.0%] over 320 episodes": 10 tasks of 32 failed episodes each.
    result = bootstrap([[0.0] * 32 for _ in range(10)])
    assert (result["units"], result["values"]) == (10, 320)
    assert (result["low"], result["high"]) == pytest.approx(share_interval(0, 10))


def test_a_share_interval_is_never_narrower_than_wilsons():
    values = [1.0] * 9 + [0.0]
    low, high = bootstrap_interval(values)
    wilson_low, wilson_high = share_interval(9, 10)
    assert low <= wilson_low and high >= wilson_high


def test_a_figure_that_is_not_a_share_keeps_its_bootstrap():
    result = bootstrap([2.0, 3.0, 4.0, 5.0] * 5)
    assert 2.0 < result["low"] < result["mean"] < result["high"] < 5.0


def test_reward_model_accuracy_of_all_wrong_pairs_has_an_interval():
    result = pair_metrics([0.0] * 10, [1.0] * 10)
    assert result["accuracy"] == 0.0
    assert result["accuracy_ci"] == pytest.approx(list(share_interval(0, 10)))


def test_judge_accuracy_when_it_is_always_wrong_or_always_right():
    wrong = [ComparisonVotes(comparison_id=i, human=(1, 1), judge=5) for i in range(10)]
    right = [ComparisonVotes(comparison_id=i, human=(1, 1), judge=1) for i in range(10)]
    for rows, share in ((wrong, 0.0), (right, 1.0)):
        accuracy = judge_agreement(rows).vs_humans.accuracy
        assert accuracy.value == share
        assert (accuracy.low, accuracy.high) == pytest.approx(share_interval(10 * share, 10))


# Where a percentile or quantile of resamples may be drawn: core.intervals alone (the judges'
# bootstrap of summed counts resamples and reads its intervals through it too).
PERCENTILE_HOMES = {Path("core/intervals.py")}


def test_no_other_module_draws_its_own_percentile_interval():
    found = []
    for folder in ("arbiter", "core", "annotate", "webapp", "rewardmodel", "training"):
        for path in (ROOT / folder).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if relative in PERCENTILE_HOMES:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr in ("percentile", "quantile", "nanpercentile"):
                    found.append(f"{relative}:{node.lineno}")
    assert not found, "an interval drawn outside core.intervals (a share must go through share_interval): " + str(found)


def test_a_count_or_a_difference_is_not_taken_for_a_share():
    # Every episode took one step: a count of 1, not "all succeeded".
    steps = bootstrap([[1.0]] * 10, share=False)
    assert (steps["low"], steps["high"]) == (1.0, 1.0)
    assert bootstrap([1.0] * 10, share=True)["low"] == pytest.approx(share_interval(10, 10)[0])


def test_an_evaluations_success_is_a_share_and_its_steps_are_not():
    from training.evaluation.episodes import Played, paired_difference, summarize

    class Outcome:
        correct, utility, parts = False, 0.0, {"steps": 1}

    class Episode:
        outcome, agent_mask = Outcome(), None

    figures = summarize(Played([[Episode()] * 32 for _ in range(10)]))
    assert figures["success"]["mean"] == 0.0 and figures["success"]["episodes"] == 320
    assert (figures["success"]["low"], figures["success"]["high"]) == pytest.approx(share_interval(0, 10))
    assert (figures["steps"]["low"], figures["steps"]["high"]) == (1.0, 1.0)
    same = paired_difference([[0.0]] * 10, [[0.0]] * 10)
    assert (same["low"], same["high"]) == (0.0, 0.0)
