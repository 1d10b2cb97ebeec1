"""The database itself refuses rows that break the domain rules (PostgreSQL)."""

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotate.models import Assignment, Comparison, Judgement, Task, Trajectory
from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory

pytestmark = pytest.mark.django_db


def _pair(task=None):
    task = task or TaskFactory()
    a, b = TrajectoryFactory(task=task), TrajectoryFactory(task=task)
    return task, a, b


def _refused(constraint: str, make):
    with pytest.raises(IntegrityError) as info, transaction.atomic():
        make()
    assert constraint in str(info.value)


def test_the_database_runs_postgresql():
    from django.db import connection

    assert connection.vendor == "postgresql"


def test_duplicate_trajectory_content_is_refused():
    t = TrajectoryFactory()
    _refused(
        "trajectory_content_hash_unique",
        lambda: Trajectory.objects.create(
            task=t.task, policy=t.policy, steps=t.steps, content_hash=t.content_hash, num_steps=3
        ),
    )


def test_task_external_id_is_unique_within_its_environment():
    TaskFactory(external_id="same", environment="calc")
    _refused(
        "task_environment_external_id_unique",
        lambda: Task.objects.create(external_id="same", environment="calc", prompt="p"),
    )
    Task.objects.create(external_id="same", environment="tickets", prompt="another environment's task")


def test_comparison_of_a_trajectory_with_itself_is_refused():
    task, a, _ = _pair()
    campaign = CampaignFactory()
    _refused(
        "comparison_pair_ordered",
        lambda: Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=a),
    )


def test_same_pair_twice_in_a_campaign_is_refused():
    task, a, b = _pair()
    campaign = CampaignFactory()
    Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=b)
    _refused(
        "comparison_pair_unique",
        lambda: Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=b),
    )


def test_comparison_across_tasks_is_refused_by_the_database():
    campaign = CampaignFactory()
    t1 = TaskFactory()
    a = TrajectoryFactory(task=t1)
    b = TrajectoryFactory()  # another task
    first, second = sorted([a, b], key=lambda t: t.id)
    _refused(
        "same_task",
        lambda: Comparison.objects.create(campaign=campaign, task=t1, trajectory_a=first, trajectory_b=second),
    )
    assert Comparison.objects.count() == 0


def test_gold_comparison_needs_an_answer():
    task, a, b = _pair()
    _refused(
        "comparison_gold_has_answer",
        lambda: Comparison.objects.create(
            campaign=CampaignFactory(), task=task, trajectory_a=a, trajectory_b=b, is_gold=True
        ),
    )


def test_one_judgement_per_comparison_and_annotator():
    task, a, b = _pair()
    comparison = Comparison.objects.create(campaign=CampaignFactory(), task=task, trajectory_a=a, trajectory_b=b)
    user = UserFactory()
    Judgement.objects.create(comparison=comparison, annotator=user, choice=1)
    _refused(
        "judgement_once_per_annotator",
        lambda: Judgement.objects.create(comparison=comparison, annotator=user, choice=5),
    )


def test_judgement_choice_outside_the_scale_is_refused():
    task, a, b = _pair()
    comparison = Comparison.objects.create(campaign=CampaignFactory(), task=task, trajectory_a=a, trajectory_b=b)
    _refused(
        "judgement_choice_range",
        lambda: Judgement.objects.create(comparison=comparison, annotator=UserFactory(), choice=6),
    )


def test_one_assignment_per_comparison_and_annotator():
    task, a, b = _pair()
    comparison = Comparison.objects.create(campaign=CampaignFactory(), task=task, trajectory_a=a, trajectory_b=b)
    user = UserFactory()
    until = timezone.now()
    Assignment.objects.create(comparison=comparison, annotator=user, left_is_a=True, leased_until=until)
    _refused(
        "assignment_once_per_annotator",
        lambda: Assignment.objects.create(comparison=comparison, annotator=user, left_is_a=False, leased_until=until),
    )


@pytest.mark.parametrize(
    ("field", "value", "constraint"),
    [
        ("votes_per_comparison", 0, "campaign_votes_at_least_one"),
        ("gold_rate", 1.5, "campaign_gold_rate_range"),
        ("lease_seconds", 0, "campaign_lease_positive"),
    ],
)
def test_campaign_settings_out_of_range_are_refused(field, value, constraint):
    _refused(constraint, lambda: CampaignFactory(**{field: value}))
