"""Snapshots: filters, aggregation, the split by task, freezing, and refusals."""

from datetime import date, timedelta

import pytest
from django.utils import timezone

from annotate.models import DatasetSnapshot, Judgement, SnapshotJudgement, SnapshotPair
from annotate.services.datasets import SnapshotFilters, snapshot_create
from tests.annotate.dataset_fixtures import voted_campaign
from webapp.errors import ArbiterError

pytestmark = pytest.mark.django_db


def _pairs(snapshot):
    return {p.comparison_id: p for p in SnapshotPair.objects.filter(snapshot=snapshot)}


def test_majority_snapshot_with_known_answers():
    campaign, (c1, c2, c3) = voted_campaign([[1, 2, 4], [5, 4, 5], [1, 5]])
    snapshot = snapshot_create(name="s", campaigns=[campaign])
    assert snapshot.status == "succeeded" and len(snapshot.content_hash) == 64
    pairs = _pairs(snapshot)
    assert (pairs[c1.id].preferred, pairs[c1.id].margin) == ("A", pytest.approx(1 / 3))
    assert (pairs[c2.id].preferred, pairs[c2.id].margin) == ("B", pytest.approx(1.0))
    assert (pairs[c3.id].preferred, pairs[c3.id].margin) == ("tie", 0.0)
    assert snapshot.stats["pairs"] == 3 and snapshot.stats["judgements"] == 8 and snapshot.stats["ties"] == 1


def test_ties_dropped_and_mean_rule():
    campaign, (c1, c2, c3) = voted_campaign([[1, 2, 4], [5, 4, 5], [1, 5]])
    snapshot = snapshot_create(name="s", campaigns=[campaign], aggregation="mean", ties="drop")
    pairs = _pairs(snapshot)
    assert set(pairs) == {c1.id, c2.id}
    assert pairs[c2.id].margin == pytest.approx((2 + 1 + 2) / 3)
    assert snapshot.stats["dropped"]["ties"] == 1
    assert SnapshotJudgement.objects.filter(snapshot=snapshot).count() == 6


def test_min_votes_and_min_agreement():
    campaign, (c1, c2, c3) = voted_campaign([[1, 1, 1], [1, 5, 1], [2]])
    only_many = snapshot_create(name="a", campaigns=[campaign], filters=SnapshotFilters(min_votes=2))
    assert set(_pairs(only_many)) == {c1.id, c2.id}
    unanimous = snapshot_create(name="b", campaigns=[campaign], filters=SnapshotFilters(min_agreement=0.9))
    assert set(_pairs(unanimous)) == {c1.id, c3.id}


def test_synthetic_and_gold_are_left_out_unless_asked():
    human, (h1,) = voted_campaign([[1, 2]])
    voted_campaign([[5, 5]], synthetic=True, campaign=human)
    voted_campaign([[1, 1]], gold={0}, campaign=human)
    default = snapshot_create(name="a", campaigns=[human])
    assert set(_pairs(default)) == {h1.id}
    with_synthetic = snapshot_create(name="b", campaigns=[human], filters=SnapshotFilters(include_synthetic=True))
    assert len(_pairs(with_synthetic)) == 2  # never the gold one


def test_date_range_filters_judgements():
    campaign, (c1, c2) = voted_campaign([[1, 1], [5, 5]])
    old = timezone.now() - timedelta(days=10)
    Judgement.objects.filter(comparison=c1).update(created_at=old)
    recent = snapshot_create(
        name="r", campaigns=[campaign], filters=SnapshotFilters(date_from=date.today() - timedelta(days=1))
    )
    assert set(_pairs(recent)) == {c2.id}
    early = snapshot_create(name="e", campaigns=[campaign], filters=SnapshotFilters(date_to=old.date()))
    assert set(_pairs(early)) == {c1.id}


def test_split_is_by_task_and_deterministic():
    campaign, comparisons = voted_campaign([[1, 2]] * 60)
    a = snapshot_create(name="a", campaigns=[campaign], seed=3, test_fraction=0.3)
    b = snapshot_create(name="b", campaigns=[campaign], seed=3, test_fraction=0.3)
    splits = {p.task_id: p.split for p in SnapshotPair.objects.filter(snapshot=a)}
    assert {p.task_id: p.split for p in SnapshotPair.objects.filter(snapshot=b)} == splits
    assert a.content_hash == b.content_hash
    assert 0 < a.stats["test_pairs"] < 60
    train_tasks = {t for t, s in splits.items() if s == "train"}
    test_tasks = {t for t, s in splits.items() if s == "test"}
    assert train_tasks and test_tasks and not train_tasks & test_tasks
    # Judgements follow their comparison's split.
    for member in SnapshotJudgement.objects.filter(snapshot=a).select_related("judgement__comparison"):
        assert member.split == splits[member.judgement.comparison.task_id]


def test_snapshot_is_frozen_when_campaign_changes_later():
    campaign, (c1,) = voted_campaign([[1, 1]])
    snapshot = snapshot_create(name="s", campaigns=[campaign])
    voted_campaign([[5, 5, 5]], campaign=campaign)
    assert set(_pairs(snapshot)) == {c1.id}
    assert SnapshotJudgement.objects.filter(snapshot=snapshot).count() == 2


def test_filters_that_match_nothing_are_refused_and_create_nothing():
    campaign, _ = voted_campaign([[1, 2]])
    with pytest.raises(ArbiterError, match="No judgement matches"):
        snapshot_create(
            name="s", campaigns=[campaign], filters=SnapshotFilters(include_synthetic=False, date_from=date(2100, 1, 1))
        )
    assert DatasetSnapshot.objects.count() == 0


def test_filters_that_leave_no_comparison_are_refused_with_the_reason():
    """The build fails in the request: the caller gets the reason, and the failed build stays
    listed with it, as a failed import or fill does (one job lifecycle, webapp/jobs.py)."""
    campaign, _ = voted_campaign([[1]])
    with pytest.raises(ArbiterError, match="1 below min_votes"):
        snapshot_create(name="s", campaigns=[campaign], filters=SnapshotFilters(min_votes=3))
    (failed,) = DatasetSnapshot.objects.all()
    assert failed.status == "failed" and "1 below min_votes" in failed.error and not SnapshotPair.objects.exists()


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"name": " "}, "needs a name"),
        ({"campaigns": []}, "at least one campaign"),
        ({"aggregation": "median"}, "aggregation must be"),
        ({"test_fraction": 1.0}, "test_fraction"),
        ({"filters": SnapshotFilters(min_agreement=2)}, "min_agreement"),
    ],
)
def test_bad_definitions_are_refused(kwargs, reason):
    campaign, _ = voted_campaign([[1, 2]])
    args = {"name": "s", "campaigns": [campaign], **kwargs}
    with pytest.raises(ArbiterError, match=reason):
        snapshot_create(**args)
    assert DatasetSnapshot.objects.count() == 0
