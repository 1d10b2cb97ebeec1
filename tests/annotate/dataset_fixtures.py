"""Campaigns with hand-placed votes, for snapshot and export tests."""

from django.utils import timezone

from annotate.models import Assignment, Comparison, Judgement
from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory


def voted_campaign(votes_by_comparison: list[list[int]], *, synthetic=False, gold=None, marks=None, campaign=None):
    """One comparison per entry, each on its own task, with those choices (A/B terms) as votes.

    `marks`: optional {comparison index: (first_wrong_step_a, first_wrong_step_b)} for the first vote.
    """
    campaign = campaign or CampaignFactory(votes_per_comparison=3)
    users = [UserFactory(is_synthetic=synthetic) for _ in range(max(map(len, votes_by_comparison)))]
    comparisons = []
    for i, choices in enumerate(votes_by_comparison):
        task = TaskFactory()
        a, b = TrajectoryFactory(task=task), TrajectoryFactory(task=task)
        comparison = Comparison.objects.create(
            campaign=campaign,
            task=task,
            trajectory_a=a,
            trajectory_b=b,
            is_gold=gold is not None and i in gold,
            gold_choice=1 if gold is not None and i in gold else None,
        )
        for j, choice in enumerate(choices):
            assignment = Assignment.objects.create(
                comparison=comparison,
                annotator=users[j],
                left_is_a=j % 2 == 0,
                leased_until=timezone.now(),
                status="submitted",
            )
            wrong = (marks or {}).get(i) if j == 0 else None
            Judgement.objects.create(
                comparison=comparison,
                annotator=users[j],
                assignment=assignment,
                choice=choice,
                synthetic=synthetic,
                seconds=5.0 + j,
                rationale=f"vote {j}",
                first_wrong_step_a=wrong[0] if wrong else None,
                first_wrong_step_b=wrong[1] if wrong else None,
            )
        comparisons.append(comparison)
    return campaign, comparisons
