"""The expert_iteration run kind through a real Celery worker: rounds on fresh worlds registered
as policies with their lineage, refused configs, and a cancelled run resumed by round."""

from pathlib import Path

import pytest
import torch
from django.conf import settings

from annotate.models import Policy
from rewardmodel.models import RewardModel
from tests.conftest import token_client, wait_for
from tests.rewardmodel.rm_fixtures import simulated_snapshot, tiny_policy
from tests.training.ppo_fixtures import low_token_reward_model
from training.envs.worlds import stage_stream, stream_seed
from training.policy.model_io import load_policy
from webapp.models import Run

pytestmark = [pytest.mark.django_db(transaction=True)]

FAST = {
    "tasks_per_round": 8,
    "samples": 2,
    "rollout_batch_size": 16,
    "eval_samples": 1,
    "dev_tasks": 8,
    "max_action_tokens": 16,
}


@pytest.fixture
def policy(db):
    return tiny_policy()


@pytest.fixture
def reward_model(policy):
    path = low_token_reward_model(Path(settings.VAR_DIR) / "reward-models" / "low-token-exit", policy.model_dir)
    return RewardModel.objects.create(
        name="low-token", snapshot=simulated_snapshot(tasks=8, seed=5), backbone="policy-llama", model_dir=str(path)
    )


def _launch(api, **config):
    response = api.post("/api/v1/runs/", {"kind": "expert_iteration", "config": config}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _ended(api, run_id, timeout=300):
    return wait_for(
        lambda: (b := api.get(f"/api/v1/runs/{run_id}").json())["status"] in ("succeeded", "failed", "cancelled") and b,
        timeout=timeout,
    )


@pytest.mark.worker
def test_expert_iteration_through_a_worker_registers_each_round_from_a_world_of_its_own(
    celery_worker_process, admin_user, policy, reward_model
):
    api = token_client(admin_user)
    run_id = _launch(
        api, policy_id=policy.pk, selection="reward_model", reward_model_id=reward_model.pk, rounds=2, **FAST
    )
    body = _ended(api, run_id)
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    summary = body["summary"]
    assert summary["rounds"] == 2 and summary["stop_reason"] == "finished"
    worlds = [e["world"] for e in summary["evaluations"][1:]]
    assert worlds == [stream_seed(stage_stream("expert_iteration", 0), r) for r in (1, 2)]
    assert all(e["kept"] == 8 for e in summary["evaluations"][1:])  # the reward model keeps a favourite per task
    log = Run.objects.get(pk=run_id).log
    assert "Anchors:" in log and f"of world {worlds[0]}" in log
    checkpoints = Policy.objects.filter(name=f"exit-run{run_id}").order_by("version")
    assert [p.version for p in checkpoints] == ["iter-0000", "iter-0001", "iter-0002"]
    last = checkpoints.last()
    assert last.parent == policy and last.metadata["ppo"]["method"] == "expert_iteration"
    assert last.metadata["ppo"]["reward_model_id"] == reward_model.pk
    links = {(link["type"], link.get("direction")) for link in body["lineage"]}
    assert {("policy", "input"), ("reward model", "input"), ("dataset", "input"), ("policy", "output")} <= links
    before, _ = load_policy(policy.model_dir)
    after, _ = load_policy(last.model_dir)
    assert any(not torch.equal(a, b) for a, b in zip(before.parameters(), after.parameters()))


def test_expert_iteration_configs_are_refused_before_queueing_with_the_field_named(admin_user, policy):
    api = token_client(admin_user)
    cases = [
        ({"policy_id": policy.pk, "selection": "reward_model"}, "reward_model_id"),
        ({"policy_id": policy.pk, "selection": "rubric", "rounds": 0}, "rounds"),
        ({"policy_id": policy.pk, "selection": "vibes"}, "selection"),
        ({"policy_id": policy.pk, "selection": "rubric", "environment": "nope"}, "nope"),
        ({"policy_id": 99999, "selection": "rubric"}, "99999"),
        ({"policy_id": policy.pk, "selection": "rubric", "samples": "²"}, "samples"),
    ]
    for config, named in cases:
        response = api.post("/api/v1/runs/", {"kind": "expert_iteration", "config": config}, format="json")
        assert response.status_code == 400, (config, response.content)
        assert named in response.content.decode(), (config, response.content)
