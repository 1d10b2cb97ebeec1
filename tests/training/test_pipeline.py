"""run_pipeline end to end at tiny size: every stage is a run with its lineage, and the
before/after table comes from the evaluation it stored."""
import json

import pytest
from django.core.management import CommandError, call_command

from rewardmodel.models import RewardModel
from tests.rewardmodel.rm_fixtures import TINY_RM, tiny_policy
from training.models import Evaluation
from webapp.models import Run

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def cloned_policy(tmp_path):
    """A tiny behaviour-cloned policy: its episodes differ in quality, so comparisons are not all ties."""
    from training.policy.bc import BCConfig
    from training.policy.services import policy_train_default

    config = BCConfig(hidden=48, layers=2, heads=2, vocab_size=512, max_steps=120, max_seconds=0, extra_worlds=0,
                      demos_per_task=1, learning_rate=3e-3, warmup_steps=5)
    return policy_train_default(config=config, name="tiny-bc", target=tmp_path / "tiny-bc", log=lambda m: None)


def test_the_pipeline_runs_every_stage_and_prints_the_before_after_table(tmp_path, capsys, cloned_policy):
    policy = cloned_policy
    out = tmp_path / "pipeline.json"
    call_command("run_pipeline", "--name", "tiny", "--policy-id", str(policy.pk), "--rollout-tasks", "40",
                 "--annotators", "2", "--eval-tasks", "3", "--eval-samples", "1", "--best-of-n", "2",
                 "--reward-model", json.dumps({**TINY_RM, "epochs": 1}), "--ppo", json.dumps(
                     {"iterations": 2, "episodes_per_iteration": 8, "minibatch_size": 4, "eval_every": 1,
                      "eval_samples": 1, "rollout_batch_size": 8}), "--json", str(out))
    printed = capsys.readouterr().out
    runs = {run.kind: run for run in Run.objects.all()}
    assert set(runs) == {"rollout", "reward_model", "ppo", "evaluation"}
    assert all(run.status == "succeeded" for run in runs.values())
    model = RewardModel.objects.get(run=runs["reward_model"])
    assert model.snapshot.campaigns.get().comparisons.count() == runs["rollout"].summary["comparisons"] > 0
    assert {link["id"] for link in runs["ppo"].lineage if link["type"] == "reward model"} == {model.pk}
    evaluation = Evaluation.objects.get()
    labels = [entry.label for entry in evaluation.entries.all()]
    assert labels[0].endswith("(start)") and labels[1].startswith("best-of-2") and "PPO" in labels[-1]
    for label in labels:
        assert label in printed
    assert "success" in printed and f"/training/evaluations/{evaluation.pk}/" in printed
    report = json.loads(out.read_text())
    assert report["evaluation_id"] == evaluation.pk and set(report["seconds"]) >= {"rollouts", "ppo", "evaluation"}


def test_bad_pipeline_settings_are_refused_before_anything_runs():
    with pytest.raises(CommandError, match="samples_per_task"):
        call_command("run_pipeline", "--samples-per-task", "1")
    with pytest.raises(CommandError, match="JSON"):
        call_command("run_pipeline", "--ppo", "{not json")
    with pytest.raises(CommandError, match="kl_coef"):
        call_command("run_pipeline", "--policy-id", str(tiny_policy().pk), "--rollout-tasks", "10",
                     "--ppo", json.dumps({"kl_coef": -1}), "--name", "refused")
    assert not Run.objects.filter(kind="ppo").exists()
