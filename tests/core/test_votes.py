"""One majority rule (core.votes): votes A, A, tie, tie are A in the dataset the reward model
learns from, on the judge-agreement page, in the loop's audit and on the quality page."""

from __future__ import annotations

import pytest

from core.votes import SIDE, majority, majority_of_choices, side

A_A_TIE_TIE = [1, 2, 3, 3]


@pytest.mark.parametrize(
    ("choices", "expected"),
    [
        ([1, 2, 3, 3], "A"),  # two for A, none for B: A, however many ties
        ([4, 5, 3, 3, 3], "tie"),  # more ties than votes for B
        ([1, 5], "tie"),  # A and B level
        ([1, 1, 5], "A"),
        ([5, 4, 1, 3], "B"),
        ([3], "tie"),
    ],
)
def test_the_rule(choices, expected):
    assert SIDE[majority_of_choices(choices)] == expected


def test_no_votes_have_no_majority():
    assert majority([]) is None and majority_of_choices([]) is None


def test_sides_of_the_scale():
    assert [side(c) for c in range(1, 6)] == ["A", "A", "tie", "B", "B"]


def test_every_place_takes_the_same_label():
    from annotate.judges.agreement import ComparisonVotes, judge_agreement
    from annotate.preferences import aggregate

    assert aggregate(A_A_TIE_TIE, "majority").preferred == "A"
    row = ComparisonVotes(comparison_id=1, human=tuple(A_A_TIE_TIE), judge=1)
    assert judge_agreement([row]).vs_humans.accuracy.value == 1.0  # the judge's A is the label


@pytest.mark.django_db
def test_the_audit_and_the_quality_page_take_the_same_label():
    from django.utils import timezone

    from annotate.models import Assignment, Comparison, Judgement
    from annotate.quality import campaign_quality
    from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory
    from training.loop.audit import _majority

    campaign = CampaignFactory(votes_per_comparison=5)
    task = TaskFactory()
    comparison = Comparison.objects.create(
        campaign=campaign,
        task=task,
        trajectory_a=TrajectoryFactory(task=task),
        trajectory_b=TrajectoryFactory(task=task),
    )
    for i, choice in enumerate([*A_A_TIE_TIE, 1]):
        user = UserFactory(username=f"v{i}")
        assignment = Assignment.objects.create(
            comparison=comparison, annotator=user, left_is_a=True, leased_until=timezone.now(), status="submitted"
        )
        Judgement.objects.create(comparison=comparison, annotator=user, assignment=assignment, choice=choice, seconds=5)
    assert _majority([campaign.pk]) == {comparison.pk: "A"}  # A, A, tie, tie, A
    # The fifth voter's others are A, A, tie, tie: A, which the fifth voted.
    by = {a.username: a for a in campaign_quality(campaign=campaign).annotators}
    assert by["v4"].majority_agreement == 1.0
