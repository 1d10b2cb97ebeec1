"""A task belongs to its environment: two environments may each have a `cat-001` (issue 29)."""

from __future__ import annotations

import pytest

from annotate.models import Task, Trajectory
from annotate.services.imports import trajectories_import_objects

pytestmark = pytest.mark.django_db


def _episode(environment: str, prompt: str, answer: str = "42", external_id: str = "cat-001") -> dict:
    return {
        "schema": "arbiter.trajectory/v1",
        "task": {"external_id": external_id, "prompt": prompt, "environment": environment},
        "agent": {"name": "agent", "version": "1"},
        "steps": [
            {"kind": "action", "tool": "lookup", "arguments": {"q": "x"}},
            {"kind": "observation", "content": "y"},
        ],
        "answer": answer,
    }


def test_the_same_task_id_in_two_environments_is_two_tasks_with_their_own_prompts():
    trajectories_import_objects(objects=[_episode("catalog", "Price of the red mug?")])
    report = trajectories_import_objects(objects=[_episode("tickets", "Who owns ticket 7?")])
    assert report.created == 1
    tasks = {t.environment: t for t in Task.objects.filter(external_id="cat-001")}
    assert set(tasks) == {"catalog", "tickets"}
    assert tasks["tickets"].prompt == "Who owns ticket 7?"


def test_the_same_episode_in_two_environments_is_filed_under_each_environments_task():
    """With the same prompt and the same steps it used to be a duplicate of the first
    environment's trajectory, so a second environment's loop labelled the first's episodes."""
    for environment in ("catalog", "catalog-v2"):
        report = trajectories_import_objects(objects=[_episode(environment, "Price of the red mug?")])
        assert report.created == 1 and report.duplicates == 0
    filed = sorted(Trajectory.objects.filter(task__external_id="cat-001").values_list("task__environment", flat=True))
    assert filed == ["catalog", "catalog-v2"]


def test_within_one_environment_an_id_still_names_one_prompt():
    trajectories_import_objects(objects=[_episode("catalog", "Price of the red mug?")])
    from annotate.services.imports import ImportRejected

    with pytest.raises(ImportRejected) as caught:
        trajectories_import_objects(objects=[_episode("catalog", "Another prompt", answer="7")])
    (error,) = caught.value.details
    assert "task 'cat-001' of environment 'catalog' already exists with a different prompt" in error["error"]
