"""Campaigns whose comparisons a judge can answer (trajectories with rubric outcomes), judges of
each kind, and a judge run executed in this process as a worker executes it."""

from __future__ import annotations

from annotate.judges.votes import VoteIn, judge_votes_store
from annotate.models import Comparison, Judge
from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory
from webapp.runs.services import run_execute, run_launch


def outcome(correct: bool, steps: int = 3) -> dict:
    return {"correct": correct, "steps": steps, "tool_errors": 0, "loop": False, "utility": 10 * correct - steps}


def rubric_campaign(n: int = 6, k: int = 2, **kwargs):
    """n comparisons: A right and B wrong on even ones, the other way round on odd ones."""
    campaign = CampaignFactory(votes_per_comparison=k, **kwargs)
    for i in range(n):
        task = TaskFactory(reference_answer=f"answer {i}")
        a = TrajectoryFactory(task=task, outcome=outcome(i % 2 == 0))
        b = TrajectoryFactory(task=task, outcome=outcome(i % 2 == 1))  # made second: the higher id, as B must be
        Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=b)
    return campaign


def rubric_judge(name: str = "rubric") -> Judge:
    return Judge.objects.get_or_create(name=name, defaults={"kind": Judge.Kind.RUBRIC})[0]


def judge_run(user, **config):
    """Launch a judge run and execute it here, as a worker would; returns the run, reloaded."""
    run = run_launch(kind="judge", config=config, user=user, enqueue=False)
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    return run


def chat_judge_votes(campaign, name: str = "chat-judge") -> Judge:
    """A chat judge that has answered every comparison of the campaign, as a run would store it:
    A much better on every other comparison, B much better on the rest (no server needed)."""
    judge = Judge.objects.create(name=name, kind="chat", config={"base_url": "http://127.0.0.1:9/v1", "model": "j"})
    for i, comparison in enumerate(Comparison.objects.filter(campaign=campaign).order_by("id")):
        vote = VoteIn(probe="first", choice=1 if i % 2 == 0 else 5, rationale="It reads the page.")
        judge_votes_store(judge=judge, comparison=comparison, votes=[vote], run_id=None, count_toward_votes=False)
    return judge
