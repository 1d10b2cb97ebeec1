"""run_pipeline end to end at tiny size: every stage is a run with its lineage, and the
before/after table comes from the evaluation it stored. Then the loop's next round from the
dashboard, labelled by people: it waits for them, refuses to train before they have labelled,
trains on every label so far, keeps round one's start as the KL reference, and audits."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import Client

from annotate.models import Judgement, Policy, Trajectory
from rewardmodel.models import RewardModel
from tests.factories import UserFactory
from tests.helpers import TINY_EXIT, TINY_LOOP_ARGUMENTS, TINY_PPO
from tests.rewardmodel.rm_fixtures import TINY_RM, tiny_policy
from training.models import AuditItem, Evaluation, LoopRound
from training.simulation import campaign_simulate_labels
from webapp.errors import ArbiterError
from webapp.models import Run
from webapp.runs.services import run_execute, run_launch

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def _cloned_policy_row(tmp_path_factory, django_db_setup, django_db_blocker) -> dict:
    """A tiny behaviour-cloned policy, trained once for the module: its model folder, and the
    fields of its row (each test empties the tables, so each test registers the row again)."""
    from training.policy.bc import BCConfig
    from training.policy.services import policy_train_default

    config = BCConfig(
        hidden=48,
        layers=2,
        heads=2,
        vocab_size=512,
        max_steps=120,
        max_seconds=0,
        extra_worlds=0,
        demos_per_task=1,
        learning_rate=3e-3,
        warmup_steps=5,
    )
    with django_db_blocker.unblock():
        policy = policy_train_default(
            config=config, name="tiny-bc", target=tmp_path_factory.mktemp("pipeline") / "tiny-bc", log=lambda m: None
        )
        row = {field: getattr(policy, field) for field in ("name", "version", "model_dir", "metadata")}
        policy.delete()
    return row


@pytest.fixture
def cloned_policy(_cloned_policy_row):
    """The module's tiny behaviour-cloned policy: its episodes differ in quality, so comparisons are not all ties."""
    return Policy.objects.create(**_cloned_policy_row)


def test_the_pipeline_runs_every_stage_and_the_loop_goes_on_with_peoples_labels(tmp_path, capsys, cloned_policy):
    policy = cloned_policy
    out = tmp_path / "pipeline.json"
    # (Wrong answers told apart by their errors: the tiny policy is nearly always wrong, and the loop's
    # default, a tie, would leave no pair to train on.)
    call_command(
        "run_pipeline",
        "--name",
        "tiny",
        "--policy-id",
        str(policy.pk),
        "--rollout-tasks",
        "40",
        "--samples-per-task",
        "2",
        "--annotator-wrong-pairs",
        "errors",
        "--annotators",
        "2",
        "--eval-tasks",
        "3",
        "--eval-samples",
        "1",
        "--best-of-n",
        "2",
        "--audit-size",
        "2",
        "--reward-model",
        json.dumps({**TINY_RM, "epochs": 1}),
        "--ppo",
        json.dumps(TINY_PPO),
        "--expert-iteration",
        json.dumps(TINY_EXIT),
        "--json",
        str(out),
    )
    printed = capsys.readouterr().out
    runs = {run.kind: run for run in Run.objects.all()}
    assert set(runs) == {"rollout", "reward_model", "ppo", "expert_iteration", "evaluation"}
    assert all(run.status == "succeeded" for run in runs.values())
    branches = Trajectory.objects.filter(metadata__branch_of__isnull=False)
    assert runs["rollout"].summary["branches"] == branches.count() > 0  # the loop branches answers by default
    for branch in branches[:20]:  # each took its source's path up to the answer
        source = Trajectory.objects.get(pk=branch.metadata["branch_of"])
        path = [step for step in source.steps if step["kind"] != "answer"]
        assert branch.task_id == source.task_id and branch.steps[: len(path)] == path
    assert runs["rollout"].summary["answer_pairs"] <= runs["rollout"].summary["comparisons"]
    model = RewardModel.objects.get(run=runs["reward_model"])
    assert model.snapshot.campaigns.get().comparisons.count() == runs["rollout"].summary["comparisons"] > 0
    assert {link["id"] for link in runs["ppo"].lineage if link["type"] == "reward model"} == {model.pk}
    evaluation = Evaluation.objects.get()
    labels = [entry.label for entry in evaluation.entries.all()]
    assert labels[0].endswith("(start)") and labels[1].startswith("best-of-2") and any("PPO" in x for x in labels)
    for label in labels:
        assert label in printed
    assert "success" in printed and f"/training/evaluations/{evaluation.pk}/" in printed
    report = json.loads(out.read_text())
    assert report["evaluation_id"] == evaluation.pk
    assert set(report["seconds"]) >= {"policy", "round 1 rollouts", "round 1 rl", "round 1 evaluation"}
    # Round one of a loop, evaluated on a world no training step saw, its audit labelled.
    first = LoopRound.objects.get(loop="tiny")
    assert first.stage == "done" and first.reference_policy == first.start_policy == policy
    assert evaluation.config["environment"] == "encyclopedia-unseen" and first.evaluation == evaluation
    # Beside the unseen world, held-out tasks of the world it trained on (no more than the evaluation's own).
    assert evaluation.config["seen_environment"] == "encyclopedia"
    assert evaluation.config["seen_tasks"] == evaluation.config["tasks"]
    assert all("seen_greedy" in entry.metrics for entry in evaluation.entries.filter(kind="policy"))
    # Both methods trained from the start with the round's reward model; the round kept the one
    # that gains most on dev (the same dev tasks and seed for both), and both are evaluated.
    exit_run = runs["expert_iteration"]
    assert first.expert_iteration_run == exit_run and first.rl_run == runs["ppo"]
    assert exit_run.config["reward_model_id"] == model.pk and exit_run.config["fresh_worlds"] is True
    assert exit_run.config["policy_id"] == policy.pk and exit_run.config["rounds"] == 1
    methods = {m["kind"]: m for m in first.choice["methods"]}
    assert set(methods) == {"ppo", "expert_iteration"}
    assert methods["ppo"]["start_dev_t1"] == methods["expert_iteration"]["start_dev_t1"]  # the same dev tasks
    best = max(methods.values(), key=lambda m: m["gain"])
    assert exit_run.config["dev_tasks"] == runs["ppo"].config["dev_tasks"]  # judged on the same dev tasks
    assert first.choice["chosen"] == best["kind"] and first.policy_id == best["policy_id"]
    assert {exit_run.summary["best_policy_id"], exit_run.summary["last_policy_id"]} <= {
        e.policy_id for e in evaluation.entries.all()
    }
    assert runs["ppo"].config["fresh_worlds"] is True and runs["ppo"].config["train_worlds"] == 0
    assert first.policy.run_id == best["run_id"] and first.audit_campaign.comparisons.count() <= 2 + 12
    # (At this size RL's best checkpoint by dev is often its iteration 0, whose episodes are the start's:
    # identical pairs are not audited, so the labelled pairs the model disagrees with fill the audit.)
    assert AuditItem.objects.filter(kind="top").count() <= 2
    assert (
        report["rounds"][1]["audit"]["disagreement"]["judged"]
        == AuditItem.objects.filter(kind="disagreement").count()
        > 0
    )
    assert "audit: favourite preferred" in printed
    moved = first.policy.metadata["ppo"]["iteration"] != 0
    assert report["rounds"][1]["policy_moved"] is moved
    assert report["rounds"][1]["method"] == ("PPO" if best["kind"] == "ppo" else "expert iteration")
    assert ("the policy did not move: the round kept its start" in printed) is not moved

    # The next round from the dashboard, labelled by people.
    admin = UserFactory(roles=["admin"])
    client = Client()
    client.force_login(admin)
    page = client.get(f"/training/evaluations/{evaluation.pk}/")
    assert page.status_code == 200 and 'id="next-round-form"' in page.content.decode()
    assert ("did not move" in page.content.decode()) is not moved
    assert page.content.decode().count("expert iteration round ") >= 2  # its checkpoints, tagged as such
    assert client.post(f"/training/evaluations/{evaluation.pk}/next-round/", {"labels": "people"}).status_code == 302
    run = Run.objects.get(kind="round")
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    second = LoopRound.objects.get(loop="tiny", number=2)
    assert run.status == "succeeded" and second.stage == "labelling" and "waiting for people" in run.summary["message"]
    assert second.start_policy == first.policy and second.campaign.comparisons.count() > 0
    with pytest.raises(ArbiterError, match="waiting for labels"):  # nobody has labelled yet
        run_launch(kind="round", config={"loop": "tiny"}, user=admin)
    campaign_simulate_labels(campaign=second.campaign, annotators=2, seed=1)  # the people, here
    run = run_launch(kind="round", config={"loop": "tiny"}, user=admin, enqueue=False)
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    second.refresh_from_db()
    assert run.status == "succeeded", run.error
    assert second.stage == "done" and second.evaluation_id and second.audit_campaign_id
    # Every label so far trains round two's reward model; the audits never do.
    assert set(second.reward_model.snapshot.campaigns.all()) == {first.campaign, second.campaign}
    # RL from round one's result, with the KL to round one's start.
    assert second.rl_run.config["policy_id"] == first.policy_id
    assert second.expert_iteration_run.config["policy_id"] == first.policy_id
    assert second.rl_run.config["reference_policy_id"] == policy.pk
    assert second.evaluation.reference_policy == policy
    assert {e.policy_id for e in second.evaluation.entries.all()} >= {policy.pk, first.policy_id, second.policy_id}
    # Audit judgements stay out of the next round (it labels with people: nobody has judged the audit).
    assert not Judgement.objects.filter(comparison__campaign=second.audit_campaign).exists()
    page = client.get(f"/training/evaluations/{second.evaluation_id}/").content.decode()
    assert 'id="round-2"' in page and 'id="round-0"' in page and "no votes yet" in page


def test_bad_pipeline_settings_are_refused_before_anything_runs():
    with pytest.raises(CommandError, match="samples_per_task"):
        call_command("run_pipeline", "--samples-per-task", "1")
    with pytest.raises(CommandError, match="JSON"):
        call_command("run_pipeline", "--ppo", "{not json")
    with pytest.raises(CommandError, match="kl_coef"):
        call_command(
            "run_pipeline",
            "--policy-id",
            str(tiny_policy().pk),
            "--rollout-tasks",
            "10",
            "--ppo",
            json.dumps({"kl_coef": -1}),
            "--name",
            "refused",
        )
    assert not Run.objects.filter(kind="ppo").exists()


def test_a_round_that_fails_midway_goes_on_from_its_first_missing_piece(cloned_policy, monkeypatch):
    import training.loop.rounds as rounds
    from webapp.runs.services import run_resume

    # (Steps between wrong answers too: at this size most pairs are two wrong answers, and this test
    # is about resuming, so it needs enough pairs that are not ties.)
    call_command(
        "run_pipeline",
        "--name",
        "again",
        "--policy-id",
        str(cloned_policy.pk),
        *TINY_LOOP_ARGUMENTS,
    )
    real = rounds.run_in_process

    def rl_breaks(*, kind, **kwargs):
        if kind == "ppo":
            raise ArbiterError("The ppo run #0 failed: the worker died.")
        return real(kind=kind, **kwargs)

    admin = UserFactory(roles=["admin"])
    monkeypatch.setattr(rounds, "run_in_process", rl_breaks)
    run = run_launch(kind="round", config={"loop": "again"}, user=admin, enqueue=False)
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    second = LoopRound.objects.get(loop="again", number=2)
    assert run.status == "failed" and "worker died" in run.error
    assert second.stage == "training" and second.reward_model_id and second.rl_run_id is None
    reward_model, campaign = second.reward_model_id, second.campaign_id
    # Another round cannot start while this one is unfinished, and the loop cannot skip it.
    with pytest.raises(ArbiterError, match="has not finished"):
        rounds.round_next(previous=second, labels="simulated", user=admin)

    monkeypatch.setattr(rounds, "run_in_process", real)
    run_resume(run_id=run.pk)
    run.refresh_from_db()
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    second.refresh_from_db()
    assert run.status == "succeeded", run.error
    assert second.stage == "done" and second.reward_model_id == reward_model and second.campaign_id == campaign
    assert Run.objects.filter(kind="reward_model").count() == 2  # one per round: the stopped round kept its own


def test_compare_dpo_runs_sft_and_dpo_beside_rl_on_the_same_held_out_tasks(tmp_path, capsys, cloned_policy):
    from annotate.models import Correction, SnapshotCorrection

    out = tmp_path / "compare.json"
    direct = json.dumps({"max_steps": 3, "batch_size": 4, "threads": 1})
    call_command(
        "run_pipeline",
        "--name",
        "compare",
        "--policy-id",
        str(cloned_policy.pk),
        "--rollout-tasks",
        "30",
        "--samples-per-task",
        "2",
        "--answer-branches",
        "0",
        "--annotator-wrong-pairs",
        "errors",
        "--annotators",
        "1",
        "--eval-tasks",
        "3",
        "--eval-samples",
        "1",
        "--best-of-n",
        "",
        "--audit-size",
        "1",
        "--audit-disagreements",
        "1",
        "--reward-model",
        json.dumps({**TINY_RM, "epochs": 1}),
        "--ppo",
        json.dumps({**TINY_PPO, "iterations": 1}),
        "--methods",
        "rl",
        "--compare-dpo",
        "--corrections",
        "6",
        "--sft",
        direct,
        "--dpo",
        direct,
        "--json",
        str(out),
    )
    printed = capsys.readouterr().out
    first = LoopRound.objects.get(loop="compare")
    assert first.sft_run.status == first.dpo_run.status == "succeeded"
    # A simulated annotator fixed wrong episodes of the round's campaign, replayed and reviewed by the rubric.
    made = Correction.objects.filter(comparison__campaign=first.campaign)
    assert 0 < made.count() <= 6 and all(c.replayed for c in made)
    assert all((c.status == "accepted") == bool(c.corrected.outcome.get("correct")) for c in made)
    snapshot = first.reward_model.snapshot
    accepted = set(made.filter(status="accepted").values_list("pk", flat=True))
    assert set(SnapshotCorrection.objects.filter(snapshot=snapshot).values_list("correction_id", flat=True)) == accepted
    # SFT and DPO from the round's start on the round's dataset, evaluated beside RL on the same tasks.
    for run in (first.sft_run, first.dpo_run):
        assert run.config["policy_id"] == cloned_policy.pk and run.config["snapshot_id"] == snapshot.pk
    evaluation = first.evaluation
    policies = {e.policy_id: e for e in evaluation.entries.all()}
    assert {first.sft_run.summary["policy_id"], first.dpo_run.summary["policy_id"], first.policy_id} <= set(policies)
    report = json.loads(out.read_text())
    methods = {(h["a"]["method"], h["b"]["method"]) for h in report["head_to_head"]}
    assert ("PPO", "SFT") in methods or ("SFT", "PPO") in methods
    assert {"sft", "dpo"} <= set(report["direct"]) and "round 1 corrections" in report["seconds"]
    assert "Head to head on the same held-out tasks" in printed and "[DPO]" in printed
    # The benchmark that chooses SFT and DPO settings on dev tasks, run as a user runs it, on this loop.
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
    }
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/compare_dpo.py",
            "--loops",
            "compare",
            "--tune",
            "sft",
            "--dev-tasks",
            "3",
            "--variant",
            "a: max_steps=1 batch_size=2 threads=1",
            "--variant",
            "b: max_steps=2 batch_size=2 threads=1",
        ],
        cwd=Path(settings.BASE_DIR),
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^\| a \| [\d.]+ \[", done.stdout, re.MULTILINE) and "| start |" in done.stdout
    out = subprocess.run(
        [sys.executable, "benchmarks/compare_dpo.py", "--loops", "compare"],
        cwd=Path(settings.BASE_DIR),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert out.returncode == 0 and "sampled: DPO - SFT" in out.stdout, out.stderr[-3000:]
