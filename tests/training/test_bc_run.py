"""A behaviour-cloning run at tiny size, executed in-process as a worker would."""

from pathlib import Path

import pytest

from annotate.models import Policy
from webapp.models import Run
from webapp.runs.services import run_execute, run_launch

pytestmark = pytest.mark.django_db

TINY_BC = {
    "demos_per_task": 1,
    "extra_worlds": 0,
    "vocab_size": 400,
    "hidden": 32,
    "layers": 1,
    "heads": 2,
    "batch_size": 8,
    "max_steps": 4,
    "warmup_steps": 1,
    "max_seconds": 30,
}


def test_a_bc_run_registers_a_policy_made_by_that_run(admin_user):
    run = run_launch(kind="bc", config={**TINY_BC, "policy_name": "tiny-bc"}, user=admin_user, enqueue=False)
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error + run.log
    policy = Policy.objects.get(pk=run.summary["policy_id"])
    assert policy.name == "tiny-bc" and policy.run_id == run.pk and (Path(policy.model_dir) / "config.json").exists()
    assert {"greedy", "t1"} <= set(run.summary["eval"]) and run.summary["bc"]["steps"] == 4
    assert any(link["type"] == "policy" and link["direction"] == "output" for link in run.lineage)
    assert run.metrics.exists()


def test_bc_configs_are_checked_before_queueing(admin_user):
    from webapp.errors import ArbiterError

    with pytest.raises(ArbiterError, match="hidden: a multiple of heads"):
        run_launch(kind="bc", config={"hidden": 30, "heads": 4}, user=admin_user)
    with pytest.raises(ArbiterError, match="policy_name"):
        run_launch(kind="bc", config={"policy_name": "../x"}, user=admin_user)
    assert not Run.objects.exists()


def test_a_bc_run_with_a_rollout_campaign_queues_rollouts_that_fill_it_once_it_succeeds(admin_user):
    from annotate.models import Campaign

    campaign = Campaign.objects.create(name="After BC")
    run = run_launch(
        kind="bc",
        user=admin_user,
        enqueue=False,
        config={
            **TINY_BC,
            "policy_name": "tiny-bc",
            "rollout_campaign_id": campaign.pk,
            "rollout_tasks": 2,
            "rollout_samples": 2,
        },
    )
    assert not Run.objects.filter(kind="rollout").exists()  # nothing follows a run that has not succeeded
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error + run.log
    follow_up = Run.objects.get(kind="rollout")
    assert follow_up.status == "queued" and follow_up.created_by == admin_user
    assert follow_up.config["policy_id"] == run.summary["policy_id"] and follow_up.config["campaign_id"] == campaign.pk
    assert run.summary["rollout_run_id"] == follow_up.pk
    assert any(link["type"] == "run" and link["id"] == follow_up.pk for link in run.lineage)
    assert f"Queued rollout run #{follow_up.pk}" in run.log

    run_execute(run_id=follow_up.pk, attempt=follow_up.attempt)
    follow_up.refresh_from_db()
    assert follow_up.status == "succeeded", follow_up.error + follow_up.log
    assert campaign.comparisons.exists()
    assert {c.trajectory_a.policy_id for c in campaign.comparisons.select_related("trajectory_a")} == {
        run.summary["policy_id"]
    }


def test_a_bc_run_into_a_missing_campaign_is_refused_before_queueing(admin_user):
    from webapp.errors import ArbiterError

    with pytest.raises(ArbiterError, match="rollout_campaign_id: no campaign with id 999999"):
        run_launch(kind="bc", config={**TINY_BC, "rollout_campaign_id": 999999}, user=admin_user)
    with pytest.raises(ArbiterError, match="rollout_samples: between 1 and 64"):
        run_launch(kind="bc", config={**TINY_BC, "rollout_samples": 0}, user=admin_user)
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_bc_run_in_two_processes_on_a_real_worker_registers_its_policy(celery_worker_process, admin_user):
    """processes=2 through the API: the Celery worker launches two gloo ranks for the cloning,
    loads their weights back, evaluates and registers the policy."""
    from tests.conftest import token_client, wait_for

    api = token_client(admin_user)
    config = {**TINY_BC, "policy_name": "tiny-bc-ddp", "processes": 2}
    response = api.post("/api/v1/runs/", {"kind": "bc", "config": config}, format="json")
    assert response.status_code == 201, response.content
    run_id = response.json()["id"]
    wait_for(lambda: not Run.objects.get(pk=run_id).is_active, timeout=240)
    run = Run.objects.get(pk=run_id)
    assert run.status == "succeeded", run.error + run.log
    assert run.config["processes"] == 2 and run.summary["bc"]["steps"] == 4
    assert Policy.objects.get(pk=run.summary["policy_id"]).name == "tiny-bc-ddp"
    assert run.metrics.exists()  # rank 0's metrics reached the run


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_lora_bc_run_on_a_real_worker_clones_into_a_registered_chat_model(
    celery_worker_process, admin_user, tmp_path
):
    """lora_rank through the API on the Celery worker: adapters of a registered Qwen2 model
    trained on the arithmetic demonstrations, merged, and the policy registered."""

    from tests.conftest import token_client, wait_for
    from tests.training.chat_models import registered_qwen

    base = registered_qwen(tmp_path, "worker-qwen")
    config = {
        "environment": "arithmetic",
        "base_policy_id": base.pk,
        "policy_name": "worker-qwen-lora",
        "extra_worlds": 0,
        "batch_size": 4,
        "max_steps": 3,
        "warmup_steps": 1,
        "dev_every": 0,
        "lora_rank": 4,
    }
    response = token_client(admin_user).post("/api/v1/runs/", {"kind": "bc", "config": config}, format="json")
    assert response.status_code == 201, response.content
    run_id = response.json()["id"]
    wait_for(lambda: not Run.objects.get(pk=run_id).is_active, timeout=240)
    run = Run.objects.get(pk=run_id)
    assert run.status == "succeeded", run.error + run.log
    assert "LoRA of rank 4" in run.log
    cloned = Policy.objects.get(pk=run.summary["policy_id"])
    assert cloned.parent_id == base.pk and (Path(cloned.model_dir) / "model.safetensors").exists()
    assert not (Path(cloned.model_dir) / "adapter_config.json").exists()  # merged, not an adapter
