"""Held-out metrics of a reward model, checked against hand-computed values."""

import math

import pytest

from core.intervals import bootstrap_interval
from rewardmodel.evaluate import ordering_accuracy, pair_metrics

LN3, LN9 = math.log(3), math.log(9)


def test_accuracy_counts_equal_scores_as_half():
    metrics = pair_metrics([2.0, 1.0, 0.0, 3.0], [1.0, 1.0, 1.0, 0.0])
    assert metrics["accuracy"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert metrics["n"] == 4 and metrics["ties"] == 0
    assert metrics["mean_margin"] == pytest.approx((1 + 0 - 1 + 3) / 4)


def test_kept_ties_are_left_out_and_counted():
    metrics = pair_metrics([2.0, 0.0, 0.0, 3.0], [1.0, 5.0, 1.0, 0.0], margins=[1.0, 0.0, 1.0, 1.0])
    assert metrics["ties"] == 1 and metrics["n"] == 3
    assert metrics["accuracy"] == pytest.approx(2 / 3)


def test_only_ties_give_no_accuracy():
    metrics = pair_metrics([1.0], [0.0], margins=[0.0])
    assert metrics["n"] == 0 and metrics["ties"] == 1 and metrics["accuracy"] is None


def test_expected_calibration_error_by_hand():
    # P(chosen) = sigmoid(difference): ln 3 gives 0.75, ln 9 gives 0.9.
    # Bin of 0.75: one pair right, one wrong (the model preferred the rejected side at 0.75) -> gap 0.25.
    # Bin of 0.9: both right -> gap 0.1. ECE = 2/4 * 0.25 + 2/4 * 0.1.
    metrics = pair_metrics([LN3, 0.0, LN9, LN9], [0.0, LN3, 0.0, 0.0])
    assert metrics["ece"] == pytest.approx(0.175)
    filled = [row for row in metrics["reliability"] if row["count"]]
    assert [(row["count"], row["accuracy"]) for row in filled] == [(2, 0.5), (2, 1.0)]
    assert filled[0]["confidence"] == pytest.approx(0.75) and filled[1]["confidence"] == pytest.approx(0.9)
    assert len(metrics["reliability"]) == 10 and sum(row["count"] for row in metrics["reliability"]) == 4


def test_a_calibrated_model_has_small_ece_and_a_confident_wrong_one_a_large_one():
    calibrated = pair_metrics([LN3] * 3 + [0.0], [0.0] * 3 + [LN3])  # 0.75 confident, right 3 times in 4
    assert calibrated["ece"] == pytest.approx(0.0, abs=1e-9)
    overconfident = pair_metrics([0.0] * 4, [10.0] * 4)  # sure of the wrong side every time
    assert overconfident["ece"] > 0.99 and overconfident["accuracy"] == 0.0


def test_accuracy_by_strength_groups_pairs_by_margin():
    metrics = pair_metrics(
        [1.0, 0.0, 1.0, 1.0, 1.0],
        [0.0, 1.0, 0.0, 0.0, 0.0],
        margins=[1 / 3, 1 / 3, 1.0, 1.0, 1.0],
        votes=[3, 3, 3, 3, 5],
    )
    assert metrics["by_strength"] == [{"value": 0.33, "n": 2, "accuracy": 0.5}, {"value": 1.0, "n": 3, "accuracy": 1.0}]
    assert metrics["by_votes"] == [{"value": 3.0, "n": 4, "accuracy": 0.75}, {"value": 5.0, "n": 1, "accuracy": 1.0}]


def test_the_bootstrap_interval_holds_the_estimate_and_narrows_with_more_pairs():
    few = pair_metrics([1.0, 1.0, 1.0, 0.0] * 5, [0.5] * 20)
    many = pair_metrics([1.0, 1.0, 1.0, 0.0] * 500, [0.5] * 2000)
    for metrics in (few, many):
        low, high = metrics["accuracy_ci"]
        assert metrics["accuracy"] == pytest.approx(0.75)
        assert low <= metrics["accuracy"] <= high
    assert many["accuracy_ci"][1] - many["accuracy_ci"][0] < few["accuracy_ci"][1] - few["accuracy_ci"][0]
    assert bootstrap_interval([1, 0, 1, 1]) == bootstrap_interval([1, 0, 1, 1])  # seeded


def test_ordering_accuracy_skips_equal_truth():
    result = ordering_accuracy(
        [
            (2.0, 1.0, 10.0, 0.0),  # right
            (2.0, 1.0, 0.0, 10.0),  # wrong
            (1.0, 1.0, 5.0, 0.0),  # equal scores: half
            (0.0, 3.0, -1.0, 4.0),  # right
            (9.0, 1.0, 3.0, 3.0),
        ]
    )  # equal truth: skipped
    assert result["n"] == 4 and result["skipped"] == 1
    assert result["accuracy"] == pytest.approx(2.5 / 4)
    assert result["accuracy_ci"][0] <= result["accuracy"] <= result["accuracy_ci"][1]
    assert ordering_accuracy([(1.0, 0.0, 2.0, 2.0)])["accuracy"] is None
