"""Scripted trajectories into the database, and simulated annotators filling a campaign."""

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Comparison, Judgement, Trajectory
from annotate.services.datasets import SnapshotFilters, snapshot_create
from tests.factories import CampaignFactory
from training.simulated_annotators import AnnotatorProfile
from training.simulation import campaign_simulate_labels, scripted_trajectories_generate
from webapp.errors import ArbiterError

pytestmark = pytest.mark.django_db


def test_scripted_trajectories_are_stored_with_outcomes_and_comparisons():
    campaign = CampaignFactory(votes_per_comparison=2)
    report = scripted_trajectories_generate(campaign=campaign, n_tasks=6, samples_per_agent=2)
    assert report.trajectories > 0 and report.comparisons > 0 and 0 < report.success_rate <= 1
    trajectory = Trajectory.objects.select_related("task").first()
    assert {"correct", "utility", "quote_support", "steps"} <= set(trajectory.outcome)
    assert trajectory.task.reference_answer and trajectory.task.environment == "encyclopedia"
    assert Comparison.objects.filter(campaign=campaign).count() == report.comparisons


def test_simulated_annotators_fill_a_campaign_through_the_assignment_service():
    campaign = CampaignFactory(votes_per_comparison=2)
    scripted_trajectories_generate(campaign=campaign, n_tasks=5, samples_per_agent=2)
    made = campaign_simulate_labels(campaign=campaign, annotators=3, profile=AnnotatorProfile(temperature=0.0))
    comparisons = Comparison.objects.filter(campaign=campaign)
    assert made == 2 * comparisons.count()
    assert all(c.votes == 2 and c.status == "complete" for c in comparisons)
    judgements = Judgement.objects.filter(comparison__campaign=campaign).select_related(
        "comparison__trajectory_a", "comparison__trajectory_b", "annotator"
    )
    assert all(j.synthetic and j.annotator.is_synthetic for j in judgements)
    for j in judgements:  # no noise: the higher utility wins, a tie for equal ones
        ua, ub = j.comparison.trajectory_a.outcome["utility"], j.comparison.trajectory_b.outcome["utility"]
        assert (j.choice < 3, j.choice == 3, j.choice > 3) == (ua > ub, ua == ub, ua < ub)
    # Synthetic labels stay out of datasets unless asked for.
    with pytest.raises(ArbiterError, match="No judgement matches"):
        snapshot_create(name="humans", campaigns=[campaign])
    assert (
        snapshot_create(name="sim", campaigns=[campaign], filters=SnapshotFilters(include_synthetic=True)).status
        == "succeeded"
    )


def test_simulate_annotators_command(tmp_path):
    call_command("generate_trajectories", "--tasks", "3", "--campaign", "Sim")
    call_command("simulate_annotators", "--campaign", "Sim", "--annotators", "2", "--flip", "0.25")
    assert Judgement.objects.filter(synthetic=True).exists()
    with pytest.raises(CommandError, match="No campaign named"):
        call_command("simulate_annotators", "--campaign", "Nope")
    with pytest.raises(CommandError, match="flip must be between 0 and 1"):
        call_command("simulate_annotators", "--campaign", "Sim", "--flip", "2")
