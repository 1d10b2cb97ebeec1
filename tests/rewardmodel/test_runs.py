"""Reward-model runs through real Celery workers: train, evaluate and register; cancel; a killed
worker and a resume from the checkpoint."""

import os
import signal

import pytest

from rewardmodel.models import RewardModel
from tests.conftest import start_worker, stop_worker, token_client, wait_for
from tests.helpers import processes_with_env
from tests.rewardmodel.rm_fixtures import TINY_RM, simulated_snapshot, tiny_policy
from webapp.models import Run, RunMetric

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _run(api, run_id):
    return api.get(f"/api/v1/runs/{run_id}").json()


def _launch(api, **config):
    response = api.post("/api/v1/runs/", {"kind": "reward_model", "config": config}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _ended(api, run_id, timeout=240):
    return wait_for(lambda: (b := _run(api, run_id))["status"] not in ("queued", "running") and b, timeout=timeout)


def test_a_reward_model_run_trains_evaluates_and_registers(celery_worker_process, admin_user):
    policy = tiny_policy()
    snapshot = simulated_snapshot(tasks=60)
    api = token_client(admin_user)
    run_id = _launch(
        api, snapshot_id=snapshot.pk, eval_policy_id=policy.pk, name="rm-test", epochs=4, learning_rate=1e-3, **TINY_RM
    )
    seen_progress = wait_for(lambda: (b := _run(api, run_id))["progress"] > 0 and b, timeout=120)
    assert seen_progress["status"] in ("running", "succeeded")
    body = _ended(api, run_id)
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    model = RewardModel.objects.get(pk=body["summary"]["reward_model_id"])
    assert model.snapshot_id == snapshot.pk and model.run_id == run_id and model.name == "rm-test"
    assert (model.config["tokenizer_dir"] == policy.model_dir) and os.path.isdir(model.model_dir)
    test = model.metrics["test"]
    assert test["n"] == body["summary"]["test_pairs"] > 0 and 0 <= test["accuracy"] <= 1
    assert model.metrics["human_agreement"]["pairs_of_votes"] > 0 and "policy_pairs" in model.metrics
    assert any(link["type"] == "reward model" and link["direction"] == "output" for link in body["lineage"])
    assert any(link["type"] == "dataset" for link in body["lineage"])
    assert "train/loss" in body["metrics"] or any(k.startswith("train") for k in body["metrics"])


def test_a_reward_model_run_in_two_processes_on_the_worker_registers_and_leaves_none(celery_worker_process, admin_user):
    """processes=2: the Celery worker launches two gloo ranks, forwards their progress and
    metrics to the run, and none of them is left when the run has ended."""
    from webapp.runs.services import run_dir

    policy = tiny_policy()
    snapshot = simulated_snapshot(tasks=40, seed=2)
    api = token_client(admin_user)
    run_id = _launch(
        api, snapshot_id=snapshot.pk, tokenizer_dir=policy.model_dir, name="rm-ddp", epochs=2, processes=2, **TINY_RM
    )
    body = _ended(api, run_id)
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    assert "training in 2 data-parallel processes" in Run.objects.get(pk=run_id).log
    assert RunMetric.objects.filter(run_id=run_id, values__has_key="train/loss").exists()  # from rank 0
    assert RewardModel.objects.get(run_id=run_id).config["processes"] == 2
    work = run_dir(Run.objects.get(pk=run_id)) / "work" / "parallel"
    assert processes_with_env("ARBITER_PARALLEL_DIR", str(work)) == []


def test_cancel_stops_a_reward_model_run_within_a_step_and_registers_nothing(celery_worker_process, admin_user):
    policy = tiny_policy()
    snapshot = simulated_snapshot(tasks=40, seed=1)
    api = token_client(admin_user)
    run_id = _launch(
        api, snapshot_id=snapshot.pk, epochs=200, checkpoint_every=0, tokenizer_dir=policy.model_dir, **TINY_RM
    )
    wait_for(
        lambda: RunMetric.objects.filter(run_id=run_id).exists() or not Run.objects.get(pk=run_id).is_active,
        timeout=120,
    )
    assert api.post(f"/api/v1/runs/{run_id}/cancel").status_code == 202
    body = _ended(api, run_id, timeout=60)
    assert body["status"] == "cancelled" and body["progress"] < 0.85
    assert not RewardModel.objects.exists()


def test_a_killed_worker_fails_the_run_and_resume_continues_from_the_checkpoint(admin_user, settings, job_sweeper):
    settings.RUN_QUEUE = "gpu-resume-test"
    policy = tiny_policy()
    snapshot = simulated_snapshot(tasks=40, seed=2)
    api = token_client(admin_user)
    env = {}
    proc, log = start_worker(queues="gpu-resume-test", name="resume-test-worker-1", env_extra=env, pool="solo")
    try:
        run_id = _launch(
            api, snapshot_id=snapshot.pk, epochs=12, checkpoint_every=4, tokenizer_dir=policy.model_dir, **TINY_RM
        )
        wait_for(
            lambda: (r := Run.objects.get(pk=run_id)).checkpoint.get("step", 0) >= 8 or not r.is_active, timeout=180
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        failed = _ended(api, run_id, timeout=30)
    finally:
        stop_worker(proc, log)
    assert failed["status"] == "failed" and "stopped sending heartbeats" in failed["error"]
    step = failed["checkpoint"]["step"]
    assert f"checkpoint at step {step}" in failed["error"]
    assert not RewardModel.objects.exists()

    proc, log = start_worker(queues="gpu-resume-test", name="resume-test-worker-2", env_extra=env, pool="solo")
    try:
        assert api.post(f"/api/v1/runs/{run_id}/resume").status_code == 202
        body = _ended(api, run_id, timeout=240)
    finally:
        stop_worker(proc, log)
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    assert body["attempt"] == 2 and f"Resuming from the checkpoint at step {step}" in Run.objects.get(pk=run_id).log
    logged = [
        (s, key)
        for s, values in RunMetric.objects.filter(run_id=run_id).values_list("step", "values")
        for key in values
    ]
    assert len(logged) == len(set(logged))  # nothing logged twice: metrics past the checkpoint were dropped
    assert any(s < step for s, _ in logged) and any(s > step for s, _ in logged)
    assert RewardModel.objects.get(run_id=run_id).metrics["train"]["steps"] > step
