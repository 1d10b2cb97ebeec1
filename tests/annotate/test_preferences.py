"""Aggregation rules and the task split on hand-built cases with known answers."""

import pytest

from annotate.preferences import aggregate, task_split


@pytest.mark.parametrize(
    ("choices", "rule", "preferred", "margin", "agreement"),
    [
        ([1, 2, 4], "majority", "A", 1 / 3, 2 / 3),
        ([5, 5, 1], "majority", "B", 1 / 3, 2 / 3),
        ([1, 5], "majority", "tie", 0.0, 0.0),  # equal A and B: a tie with no tie votes
        ([3, 3, 1], "majority", "tie", 0.0, 2 / 3),
        ([1, 1, 1], "majority", "A", 1.0, 1.0),
        ([1, 2, 4], "mean", "A", (2 + 1 - 1) / 3, 2 / 3),
        ([4, 5], "mean", "B", 1.5, 1.0),
        ([2, 4], "mean", "tie", 0.0, 0.0),
        ([3], "mean", "tie", 0.0, 1.0),
    ],
)
def test_aggregate(choices, rule, preferred, margin, agreement):
    result = aggregate(choices, rule)
    assert result.preferred == preferred
    assert result.margin == pytest.approx(margin, abs=1e-6)
    assert result.agreement == pytest.approx(agreement, abs=1e-6)
    assert result.votes == len(choices)


def test_adjudicated_label_decides_the_side():
    result = aggregate([5, 5, 1], "majority", adjudicated=2)
    assert (result.preferred, result.margin, result.agreement) == ("A", 1.0, pytest.approx(1 / 3))
    assert aggregate([5, 4], "mean", adjudicated=1).margin == 2.0


def test_task_split_is_stable_and_near_the_fraction():
    ids = [f"task-{i}" for i in range(2000)]
    first = [task_split(t, seed=7, test_fraction=0.2) for t in ids]
    assert first == [task_split(t, seed=7, test_fraction=0.2) for t in ids]
    assert 0.17 < first.count("test") / len(ids) < 0.23
    assert first != [task_split(t, seed=8, test_fraction=0.2) for t in ids]
    assert all(task_split(t, seed=1, test_fraction=0.0) == "train" for t in ids[:50])
