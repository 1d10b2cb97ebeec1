"""Comparison building strategies."""

import pytest

from annotate.models import Comparison
from annotate.services.comparisons import comparisons_build
from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory
from webapp.errors import ArbiterError

pytestmark = pytest.mark.django_db


def test_all_pairs_within_each_task_never_across_tasks_and_never_self():
    t1, t2 = TaskFactory(), TaskFactory()
    for _ in range(4):
        TrajectoryFactory(task=t1)
    for _ in range(2):
        TrajectoryFactory(task=t2)
    TrajectoryFactory()  # a task with one trajectory gives no pair
    campaign = CampaignFactory()
    assert comparisons_build(campaign=campaign) == 6 + 1
    for c in Comparison.objects.all():
        assert c.trajectory_a.task_id == c.trajectory_b.task_id == c.task_id
        assert c.trajectory_a_id < c.trajectory_b_id


def test_cap_per_task_and_rebuilding_adds_nothing_new():
    task = TaskFactory()
    for _ in range(5):  # 10 possible pairs
        TrajectoryFactory(task=task)
    campaign = CampaignFactory()
    assert comparisons_build(campaign=campaign, max_per_task=4) == 4
    assert comparisons_build(campaign=campaign, max_per_task=4) == 0
    assert comparisons_build(campaign=campaign, max_per_task=10) == 6
    assert Comparison.objects.filter(campaign=campaign).count() == 10


def test_outcome_differs_pairs_only_trajectories_with_different_known_outcomes():
    task = TaskFactory()
    right = [TrajectoryFactory(task=task, outcome={"correct": True}) for _ in range(2)]
    wrong = [TrajectoryFactory(task=task, outcome={"correct": False}) for _ in range(2)]
    TrajectoryFactory(task=task, outcome=None)
    campaign = CampaignFactory()
    assert comparisons_build(campaign=campaign, strategy="outcome_differs") == 4
    for c in Comparison.objects.all():
        assert {c.trajectory_a.outcome["correct"], c.trajectory_b.outcome["correct"]} == {True, False}
    assert {t.id for t in right + wrong} >= set(Comparison.objects.values_list("trajectory_a_id", flat=True))


def test_unknown_strategy_is_refused():
    with pytest.raises(ArbiterError, match="Unknown strategy"):
        comparisons_build(campaign=CampaignFactory(), strategy="best")


def _episode(task, calls: list[tuple[str, dict]], answer: str):
    steps = [
        step
        for tool, arguments in calls
        for step in (
            {"kind": "action", "tool": tool, "arguments": arguments},
            {"kind": "observation", "tool": tool, "content": f"result of {tool}"},
        )
    ]
    return TrajectoryFactory(task=task, steps=steps + [{"kind": "answer", "text": answer, "quotes": []}], answer=answer)


def test_same_calls_different_answer_pairs_only_where_the_answer_is_the_difference():
    task = TaskFactory()
    read = [("search", {"query": "Ada"}), ("open", {"page": 3})]
    first = _episode(task, read, "1815")
    other_answer = _episode(task, list(reversed(read)), "1816")  # the same calls in another order
    same_answer = _episode(task, read, " 1815 ")  # the same answer, spaced differently: not a difference
    _episode(task, [("search", {"query": "Ada"})], "1816")  # read less: a different path
    _episode(task, [], "1816")  # no calls at all: nothing was read
    campaign = CampaignFactory()
    assert comparisons_build(campaign=campaign, strategy="same_calls_different_answer") == 2
    pairs = {frozenset((c.trajectory_a_id, c.trajectory_b_id)) for c in Comparison.objects.all()}
    assert pairs == {frozenset((first.pk, other_answer.pk)), frozenset((same_answer.pk, other_answer.pk))}


def test_pairing_can_be_restricted_to_some_trajectories():
    task = TaskFactory()
    old = [TrajectoryFactory(task=task) for _ in range(2)]
    new = [TrajectoryFactory(task=task) for _ in range(2)]
    campaign = CampaignFactory()
    assert comparisons_build(campaign=campaign, trajectory_ids=[t.pk for t in new]) == 1
    comparison = Comparison.objects.get()
    assert {comparison.trajectory_a_id, comparison.trajectory_b_id} == {t.pk for t in new}
    assert not {t.pk for t in old} & {comparison.trajectory_a_id, comparison.trajectory_b_id}
