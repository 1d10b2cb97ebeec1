"""PPO, best-of-n and evaluation as runs: through a real Celery worker, refused configs, cancel
and resume, and checkpoints registered as policies with their lineage."""

from pathlib import Path

import pytest
import torch
from django.conf import settings

from annotate.models import Policy
from rewardmodel.models import RewardModel
from tests.conftest import token_client, wait_for
from tests.helpers import processes_with_env
from tests.rewardmodel.rm_fixtures import simulated_snapshot, tiny_policy
from tests.training.ppo_fixtures import low_token_reward_model
from training.models import Evaluation
from training.policy.model_io import load_policy
from webapp.models import Run, RunMetric

pytestmark = [pytest.mark.django_db(transaction=True)]

FAST = {
    "episodes_per_iteration": 16,
    "minibatch_size": 8,
    "epochs": 2,
    "rollout_batch_size": 16,
    "eval_every": 6,
    "eval_samples": 1,
    "dev_tasks": 16,
}


@pytest.fixture
def policy(db):
    return tiny_policy()


@pytest.fixture
def reward_model(policy):
    path = low_token_reward_model(Path(settings.VAR_DIR) / "reward-models" / "low-token-test", policy.model_dir)
    return RewardModel.objects.create(
        name="low-token", snapshot=simulated_snapshot(tasks=8, seed=5), backbone="policy-llama", model_dir=str(path)
    )


def _run(api, run_id):
    return api.get(f"/api/v1/runs/{run_id}").json()


def _ended(api, run_id, timeout=300):
    return wait_for(
        lambda: (b := _run(api, run_id))["status"] in ("succeeded", "failed", "cancelled") and b, timeout=timeout
    )


def _launch(api, kind, **config):
    response = api.post("/api/v1/runs/", {"kind": kind, "config": config}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


@pytest.mark.worker
def test_ppo_through_a_worker_raises_the_reward_model_score_and_registers_checkpoints(
    celery_worker_process, admin_user, policy, reward_model
):
    api = token_client(admin_user)
    # The hand-set reward model prefers low token ids: PPO can surely raise its score.
    run_id = _launch(
        api,
        "ppo",
        policy_id=policy.pk,
        reward="reward_model",
        reward_model_id=reward_model.pk,
        iterations=12,
        learning_rate=1e-2,
        kl_coef=0.0,
        kl_budget=0,
        lam=1.0,
        **FAST,
    )
    body = _ended(api, run_id)
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    score = [value for _, value in body["metrics"]["objective/rm_score"]]
    assert len(score) == 12 and sum(score[-2:]) / 2 > sum(score[:3]) / 3, score
    assert body["summary"]["stop_reason"] == "finished"

    checkpoints = Policy.objects.filter(name=f"ppo-run{run_id}").order_by("version")
    assert [p.version for p in checkpoints] == ["iter-0000", "iter-0006", "iter-0012"]
    last = checkpoints.last()
    assert last.parent == policy and last.run_id == run_id
    assert last.metadata["ppo"]["reward_model_id"] == reward_model.pk
    assert last.metadata["ppo"]["snapshot_id"] == reward_model.snapshot_id
    assert sum(p.metadata["ppo"]["best"] for p in checkpoints) == 1
    assert body["summary"]["best_policy_id"] in {p.pk for p in checkpoints}
    links = {(link["type"], link.get("direction")) for link in body["lineage"]}
    assert {("policy", "input"), ("reward model", "input"), ("dataset", "input")} <= links
    before, _ = load_policy(policy.model_dir)
    after, _ = load_policy(last.model_dir)
    assert any(not torch.equal(a, b) for a, b in zip(before.parameters(), after.parameters()))


@pytest.mark.worker
def test_a_cancelled_ppo_run_resumes_from_its_checkpoint(celery_worker_process, admin_user, policy):
    api = token_client(admin_user)
    run_id = _launch(
        api, "ppo", policy_id=policy.pk, reward="rubric", iterations=40, checkpoint_every=1, **{**FAST, "eval_every": 0}
    )
    wait_for(lambda: Run.objects.get(pk=run_id).checkpoint.get("step", 0) >= 2, timeout=180)
    assert api.post(f"/api/v1/runs/{run_id}/cancel").status_code == 202
    cancelled = _ended(api, run_id, timeout=60)
    assert cancelled["status"] == "cancelled"
    step = Run.objects.get(pk=run_id).checkpoint["step"]
    assert 2 <= step < 40

    run = Run.objects.get(pk=run_id)
    run.config = {**run.config, "iterations": step + 2}  # finish soon after the checkpoint
    run.save(update_fields=["config"])
    assert api.post(f"/api/v1/runs/{run_id}/resume").status_code == 202
    body = _ended(api, run_id)
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    assert f"Resuming after iteration {step}" in Run.objects.get(pk=run_id).log
    steps = sorted(
        {
            s
            for s, values in RunMetric.objects.filter(run_id=run_id).values_list("step", "values")
            if "objective/kl" in values
        }
    )
    assert steps == list(range(1, step + 3))
    assert body["summary"]["iterations"] == step + 2


@pytest.mark.worker
def test_a_grpo_run_in_two_processes_on_a_real_worker_registers_its_checkpoints(
    celery_worker_process, admin_user, policy
):
    """processes=2 through the API: the worker launches two gloo processes, each building the
    environment and scorer itself, playing its task groups and summing gradients; the first
    process's checkpoints become policies in the worker, and no process is left."""
    api = token_client(admin_user)
    config = {**FAST, "episodes_per_iteration": 8, "minibatch_size": 4, "eval_every": 2, "dev_tasks": 4}
    run_id = _launch(
        api, "grpo", policy_id=policy.pk, reward="rubric", iterations=2, group_size=2, processes=2, **config
    )
    body = _ended(api, run_id)
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    assert "2 data-parallel processes" in Run.objects.get(pk=run_id).log
    assert len(body["metrics"]["objective/rm_score"]) == 2
    checkpoints = Policy.objects.filter(name=f"grpo-run{run_id}").order_by("version")
    assert [p.version for p in checkpoints] == ["iter-0000", "iter-0002"]
    assert checkpoints.last().metadata["ppo"]["dev"]["episodes"] == 4
    assert (Path(checkpoints.last().model_dir) / "config.json").exists()
    work = Path(settings.VAR_DIR) / "runs" / str(run_id) / "ppo" / "parallel"
    assert not processes_with_env("ARBITER_PARALLEL_DIR", str(work))


@pytest.mark.worker
def test_best_of_n_and_evaluation_runs_store_their_figures(celery_worker_process, admin_user, policy, reward_model):
    api = token_client(admin_user)
    run_id = _launch(api, "best_of_n", policy_id=policy.pk, reward_model_id=reward_model.pk, n=4, split="dev", tasks=3)
    body = _ended(api, run_id)
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    assert abs(body["summary"]["kl_to_policy"] - (torch.log(torch.tensor(4.0)).item() - 0.75)) < 1e-6
    evaluation = Evaluation.objects.get(pk=body["summary"]["evaluation_id"])
    labels = [entry.label for entry in evaluation.entries.all()]
    assert len(labels) == 2 and labels[1].startswith("best-of-4")
    best = evaluation.entries.get(n=4).metrics["sampled"]
    plain = evaluation.entries.get(n=1).metrics["sampled"]
    assert best["rm_score"]["mean"] >= plain["rm_score"]["mean"]
    assert best["success"]["tasks"] == 3 and any(link["type"] == "evaluation" for link in body["lineage"])


def test_invalid_ppo_configs_are_refused_before_queueing(admin_user, policy, reward_model, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    api = token_client(admin_user)
    # A reward model whose tokenizer knows two words.
    unreadable = tmp_path / "unreadable-rm"
    unreadable.mkdir()
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "the": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(unreadable / "tokenizer.json"))
    (unreadable / "config.json").write_text("{}")
    other = RewardModel.objects.create(
        name="unreadable", snapshot=reward_model.snapshot, backbone="x", model_dir=str(unreadable)
    )
    cases = [
        ({"kl_coef": -0.1}, "kl_coef"),
        ({"episodes_per_iteration": 100_000, "minibatch_size": 8}, "training tasks"),
        ({"reward_model_id": other.pk}, "cannot read the policy's trajectories"),
        ({"reward_model_id": 0}, "reward_model_id"),
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"policy_id": 999_999}, "999999"),
        ({"processes": 0}, "processes"),
        ({"processes": 65}, "processes"),
        ({"processes": "two"}, "processes"),
        ({"processes": 3, "episodes_per_iteration": 2, "minibatch_size": 2}, "processes"),
        ({"fresh_worlds": True, "train_worlds": 4}, "train_worlds: 0 with fresh_worlds"),
        ({"loss_aggregation": "sequence"}, "loss_aggregation"),
    ]
    for change, expected in cases:
        config = {"policy_id": policy.pk, "reward": "reward_model", "reward_model_id": reward_model.pk, **change}
        response = api.post("/api/v1/runs/", {"kind": "ppo", "config": config}, format="json")
        assert response.status_code == 400 and expected in response.content.decode(), (change, response.content)
    assert not Run.objects.filter(kind="ppo").exists()
