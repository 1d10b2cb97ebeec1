"""Per-annotator quality figures on a hand-built campaign with known answers."""

import pytest

from annotate.models import Assignment, Comparison, Judgement
from annotate.quality import campaign_quality, comparisons_in_disagreement
from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory

pytestmark = pytest.mark.django_db


def _comparison(campaign, **kwargs):
    task = TaskFactory()
    return Comparison.objects.create(
        campaign=campaign,
        task=task,
        trajectory_a=TrajectoryFactory(task=task),
        trajectory_b=TrajectoryFactory(task=task),
        **kwargs,
    )


def _vote(comparison, user, choice, *, left_is_a=True, seconds=10.0):
    from django.utils import timezone

    a = Assignment.objects.create(
        comparison=comparison, annotator=user, left_is_a=left_is_a, leased_until=timezone.now(), status="submitted"
    )
    return Judgement.objects.create(comparison=comparison, annotator=user, assignment=a, choice=choice, seconds=seconds)


def test_campaign_quality_figures():
    campaign = CampaignFactory(votes_per_comparison=3)
    u1, u2, u3 = (UserFactory(username=f"u{i}") for i in (1, 2, 3))
    c1, c2 = _comparison(campaign), _comparison(campaign)
    gold = _comparison(campaign, is_gold=True, gold_choice=1)
    # c1: u1 A, u2 A, u3 B. c2: u1 B, u2 B, u3 B.
    _vote(c1, u1, 1, left_is_a=True, seconds=4)
    _vote(c1, u2, 2, left_is_a=False, seconds=8)
    _vote(c1, u3, 5, left_is_a=True, seconds=30)
    _vote(c2, u1, 4, left_is_a=False, seconds=6)
    _vote(c2, u2, 5, left_is_a=True, seconds=10)
    _vote(c2, u3, 4, left_is_a=True, seconds=50)
    _vote(gold, u1, 2)
    _vote(gold, u3, 5)

    q = campaign_quality(campaign=campaign)
    by = {a.username: a for a in q.annotators}
    assert q.judgements == 8
    assert q.pairwise.pairs == 6  # gold left out: 3 pairs per comparison
    assert q.pairwise.with_ties == pytest.approx(4 / 6)
    assert by["u1"].gold_accuracy == 1.0 and by["u3"].gold_accuracy == 0.0 and by["u2"].gold_accuracy is None
    # u3 disagrees with the others' majority on c1, agrees on c2.
    assert by["u3"].majority_agreement == pytest.approx(0.5)
    # u1's others split A/B on c1: a tie by the one majority rule (core.votes), which u1's A is
    # not; on c2 the others' B is u1's B.
    assert (by["u1"].majority_compared, by["u1"].majority_agreement) == (2, pytest.approx(0.5))
    assert by["u3"].median_seconds == pytest.approx(30)  # 30, 50 and the gold 10
    # u1: c1 chose A with A on the left (left); c2 chose B with A on the right, so B was left (left); gold A left.
    assert by["u1"].left_rate == pytest.approx(1.0)
    # u2: c1 chose A, A on the right (right); c2 chose B, A on the left (right).
    assert by["u2"].left_rate == pytest.approx(0.0)
    assert list(comparisons_in_disagreement(campaign=campaign)) == [c1]
