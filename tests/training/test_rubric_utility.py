"""The rubric's number has one name, `utility`: in the Rubric, in every figure, in a stored
trajectory's outcome, and in figures stored before the rename (training migration 0004)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from tests.factories import PolicyFactory
from training.envs.base import Rubric
from training.evaluation.episodes import METRICS
from training.evaluation.metrics import STANDARD, episode_figures

MIGRATION = importlib.import_module("training.migrations.0004_rubric_utility")


class _Episode:
    def __init__(self, outcome):
        self.outcome = outcome


def test_the_rubrics_number_is_its_utility_everywhere():
    rubric = Rubric(correct=True, utility=7.0, parts={"steps": 3})
    assert rubric.as_dict() == {"correct": True, "utility": 7.0, "steps": 3}
    assert episode_figures(_Episode(rubric)) == {"success": 1.0, "utility": 7.0, "steps": 3.0}
    assert "utility" in STANDARD and "utility" in METRICS
    assert "score" not in STANDARD and "score" not in METRICS
    assert Rubric(False, -1.0) == Rubric(correct=False, utility=-1.0, parts={})


def test_the_old_keyword_still_builds_a_rubric_and_says_its_new_name():
    with pytest.warns(DeprecationWarning, match=r"Rubric\(utility=\.\.\.\)"):
        rubric = Rubric(correct=True, score=2.5)
    assert rubric.utility == 2.5
    with pytest.raises(TypeError, match="utility="):
        Rubric(correct=True)


@pytest.mark.django_db
def test_figures_stored_under_the_old_name_are_renamed_and_back():
    from training.models import Evaluation, EvaluationEntry
    from webapp.models import Run, RunMetric

    policy = PolicyFactory(metadata={"ppo": {"iteration": 2, "dev": {"success": 0.5, "score": 3.0}}})
    evaluation = Evaluation.objects.create(name="old", split="eval", reference_policy=policy, config={})
    entry = EvaluationEntry.objects.create(
        evaluation=evaluation,
        label="start",
        policy=policy,
        metrics={"sampled": {"success": {"mean": 0.5}, "score": {"mean": 3.0}}, "greedy": {"score": {"mean": 1.0}}},
    )
    both = EvaluationEntry.objects.create(  # a value under the new name is never overwritten
        evaluation=evaluation,
        label="both",
        policy=policy,
        metrics={"sampled": {"score": {"mean": 1.0}, "utility": {"mean": 2.0}}},
    )
    run = Run.objects.create(kind="ppo", status="succeeded", config={})
    metric = RunMetric.objects.create(run=run, step=1, values={"episode/score": 4.0, "eval/dev_score": 5.0, "x": 1})

    MIGRATION.forwards(apps, None)
    entry.refresh_from_db(), both.refresh_from_db(), metric.refresh_from_db(), policy.refresh_from_db()
    assert entry.metrics == {
        "sampled": {"success": {"mean": 0.5}, "utility": {"mean": 3.0}},
        "greedy": {"utility": {"mean": 1.0}},
    }
    assert both.metrics == {"sampled": {"score": {"mean": 1.0}, "utility": {"mean": 2.0}}}
    assert metric.values == {"episode/utility": 4.0, "eval/dev_utility": 5.0, "x": 1}
    assert policy.metadata["ppo"] == {"iteration": 2, "dev": {"success": 0.5, "utility": 3.0}}

    MIGRATION.backwards(apps, None)
    entry.refresh_from_db(), metric.refresh_from_db(), policy.refresh_from_db()
    assert entry.metrics["sampled"]["score"] == {"mean": 3.0}
    assert metric.values == {"episode/score": 4.0, "eval/dev_score": 5.0, "x": 1}
    assert policy.metadata["ppo"]["dev"] == {"success": 0.5, "score": 3.0}
