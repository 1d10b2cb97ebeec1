"""Rollout runs through a real Celery worker: trajectories stored, cancel, a killed worker."""

import os
import signal
import time
from pathlib import Path

import pytest
from django.conf import settings

from annotate.models import Comparison, Policy, Trajectory
from tests.conftest import start_worker, stop_worker, token_client, wait_for
from tests.factories import CampaignFactory
from tests.policy_fixtures import tiny_policy_dir
from webapp.models import Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


@pytest.fixture
def tiny_policy(db):
    path = tiny_policy_dir(Path(settings.VAR_DIR) / "policies" / "tiny-test-policy")
    return Policy.objects.create(name="tiny", version="1", model_dir=str(path))


def _run(api, run_id):
    return api.get(f"/api/v1/runs/{run_id}").json()


def test_a_rollout_run_stores_trajectories_and_comparisons(celery_worker_process, admin_user, tiny_policy):
    api = token_client(admin_user)
    campaign = CampaignFactory()
    response = api.post(
        "/api/v1/runs/",
        {
            "kind": "rollout",
            "config": {
                "policy_id": tiny_policy.pk,
                "split": "dev",
                "tasks": 4,
                "samples_per_task": 2,
                "campaign_id": campaign.pk,
                "temperature": 1.0,
                "answer_branches": 2,
            },
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    run_id = response.json()["id"]
    body = wait_for(lambda: (b := _run(api, run_id))["status"] in ("succeeded", "failed") and b, timeout=120)
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    assert body["progress"] == 1.0 and body["device"].startswith("CPU") and body["worker"]
    stored = Trajectory.objects.filter(policy=tiny_policy)
    branches = stored.filter(metadata__branch_of__isnull=False)
    assert body["summary"]["trajectories"] + body["summary"]["branches"] == stored.count() > 0
    assert body["summary"]["branches"] == branches.count()
    for branch in branches:  # the same path as the episode it branched from, up to the answer
        source = Trajectory.objects.get(pk=branch.metadata["branch_of"])
        path = [s for s in source.steps if s["kind"] != "answer"]
        assert branch.task_id == source.task_id and branch.steps[: len(path)] == path
    assert stored.values("task").distinct().count() == 4 and all(t.source == "generated" for t in stored)
    assert Comparison.objects.filter(campaign=campaign).count() == body["summary"]["comparisons"] > 0
    assert {link["type"] for link in body["lineage"]} == {"policy", "campaign"}


def test_a_cancelled_rollout_run_stops_and_stores_nothing(celery_worker_process, admin_user, tiny_policy):
    api = token_client(admin_user)
    run_id = api.post(
        "/api/v1/runs/",
        {"kind": "rollout", "config": {"policy_id": tiny_policy.pk, "tasks": 400, "samples_per_task": 1}},
        format="json",
    ).json()["id"]
    wait_for(lambda: _run(api, run_id)["progress"] > 0, timeout=120)  # progress is visible while it runs
    assert api.post(f"/api/v1/runs/{run_id}/cancel").status_code == 202
    body = wait_for(lambda: (b := _run(api, run_id))["status"] != "running" and b, timeout=60)
    assert body["status"] == "cancelled" and body["progress"] < 1
    assert not Trajectory.objects.filter(policy=tiny_policy).exists()


def test_a_killed_worker_leaves_a_failed_run_with_the_reason(admin_user, tiny_policy, settings, job_sweeper):
    """A worker of its own (solo pool, so the job runs in the process that gets killed); the scheduled
    sweep fails the run with nobody reading it: the test watches the database, not a page."""
    settings.RUN_QUEUE = "gpu-kill-test"
    proc, log = start_worker(queues="gpu-kill-test", name="kill-test-worker", pool="solo")
    try:
        api = token_client(admin_user)
        run_id = api.post(
            "/api/v1/runs/",
            {"kind": "rollout", "config": {"policy_id": tiny_policy.pk, "tasks": 400, "samples_per_task": 1}},
            format="json",
        ).json()["id"]
        wait_for(lambda: _run(api, run_id)["progress"] > 0, timeout=120)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        killed_at = time.monotonic()
        wait_for(lambda: Run.objects.get(pk=run_id).status != "running", timeout=60)
        assert time.monotonic() - killed_at < 60
        body = _run(api, run_id)
    finally:
        stop_worker(proc, log)
    assert body["status"] == "failed"
    assert "stopped sending heartbeats" in body["error"] and body["finished_at"]
    assert Run.objects.get(pk=run_id).status == "failed"
