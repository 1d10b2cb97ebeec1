"""The management commands, as an operator runs them."""

import io
import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotate.models import Campaign, Comparison, DatasetSnapshot, Policy, Trajectory
from tests.policy_fixtures import tiny_policy_dir
from tests.samples import canonical, chat_parallel, jsonl
from training.policy.services import policy_run_dir
from webapp.models import Run
from webapp.roles import Role, user_roles
from webapp.runs.services import run_execute

pytestmark = pytest.mark.django_db


def _run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=out)
    return out.getvalue()


def test_import_trajectories_with_campaign_creates_it_and_builds_comparisons(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(jsonl(canonical(n=0), canonical(n=1), chat_parallel()))
    out = _run("import_trajectories", str(path), "--campaign", "Fresh")
    assert "Created campaign 'Fresh'" in out
    assert "Imported 3 trajectories" in out
    assert Comparison.objects.filter(campaign__name="Fresh").count() == 1


def test_import_trajectories_reports_bad_lines_and_fails(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(jsonl(canonical()) + b"{x\n")
    err = io.StringIO()
    with pytest.raises(CommandError, match="Nothing was imported"):
        call_command("import_trajectories", str(path), stderr=err)
    assert "line 2: invalid JSON" in err.getvalue()
    assert Trajectory.objects.count() == 0


def test_import_trajectories_missing_file():
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_trajectories", "/nonexistent.jsonl")


def test_make_comparisons(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(jsonl(*[canonical(n=i) for i in range(4)]))
    _run("import_trajectories", str(path))
    Campaign.objects.create(name="C")
    out = _run("make_comparisons", "--campaign", "C", "--max-per-task", "5")
    assert "Built 5 new comparisons" in out
    with pytest.raises(CommandError, match="No campaign named"):
        call_command("make_comparisons", "--campaign", "missing")


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


def _execute(run: Run) -> Run:
    """What the worker does with a queued run, in this process."""
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error + run.log
    return run


def test_load_demo_is_ready_to_label_without_a_policy_and_queues_the_policy_training_once(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    first = _run("load_demo")
    second = _run("load_demo")
    scripted = Campaign.objects.get(name="Demo: scripted agents")
    assert scripted.comparisons.count() >= 20 and "What you are judging" in scripted.guidelines
    assert [d["name"] for d in scripted.dimensions] == ["correctness", "efficiency", "grounding"]
    assert all(d["scale"] == 5 and d["description"] for d in scripted.dimensions)
    assert {c.trajectory_a.policy.name for c in scripted.comparisons.select_related("trajectory_a__policy")} <= {
        "scripted-careful",
        "scripted-hasty",
    }
    assert DatasetSnapshot.objects.get(name="Demo: simulated labels").stats["pairs"] > 100
    assert not Policy.objects.exclude(model_dir="").exists()
    # The default policy is trained by one queued run, whose config carries the follow-up.
    bc = Run.objects.get(kind="bc")
    demo = Campaign.objects.get(name="Demo: encyclopedia QA")
    assert bc.status == "queued" and bc.created_by.username == "demo-admin"
    assert bc.config["policy_name"] == "default-bc" and bc.config["rollout_campaign_id"] == demo.pk
    assert not demo.comparisons.exists() and not Run.objects.filter(kind="rollout").exists()
    assert f"training by behaviour cloning in run #{bc.pk} (queued" in first and f"run #{bc.pk} (queued" in second
    assert "Demo users (username / password / role):" in second.split("training by")[1]  # the users come last
    password = json.loads((tmp_path / "demo_users.json").read_text())["demo-annotator"]
    assert f"demo-annotator     {password}" in first and f"demo-annotator     {password}" in second
    assert user_roles(get_user_model().objects.get(username="demo-admin")) == {Role.ADMIN}

    # `make run` stopped mid-training: the next start fails the cut-off run and queues a new one, once.
    Run.objects.filter(pk=bc.pk).update(status="running", heartbeat_at=timezone.now())
    _run("load_demo")
    assert Run.objects.filter(kind="bc").count() == 1  # running, as far as anyone can tell
    assert "Failed 1 webapp.Run job(s)" in _run("jobs_sweep", "--orphaned")
    _run("load_demo")
    _run("load_demo")
    assert list(Run.objects.filter(kind="bc").order_by("pk").values_list("status", flat=True)) == ["failed", "queued"]


def test_the_demo_policy_run_fills_the_demo_campaign_when_it_succeeds_and_later_starts_reuse_it(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    _run("load_demo", "--tasks", "3", "--samples", "2")
    bc = Run.objects.get(kind="bc")
    # The default config trains for minutes; the chain is the same at a tiny size.
    Run.objects.filter(pk=bc.pk).update(config={**bc.config, **TINY_BC})
    demo = Campaign.objects.get(name="Demo: encyclopedia QA")
    assert "Policy default-bc: training" in _run("load_demo")  # still queued: nothing new

    bc = _execute(bc)
    policy = Policy.objects.get(pk=bc.summary["policy_id"])
    assert policy.name == "default-bc" and Path(policy.model_dir) == tmp_path / "policies" / "default-bc"
    # where train_policy and run_pipeline find it; a later default-bc run writes beside it, not over it
    assert policy_run_dir(name="default-bc", run_id=99) == tmp_path / "policies" / "default-bc-run99"
    rollouts = Run.objects.get(kind="rollout")
    assert rollouts.status == "queued" and bc.summary["rollout_run_id"] == rollouts.pk
    assert rollouts.config["policy_id"] == policy.pk and rollouts.config["campaign_id"] == demo.pk
    assert rollouts.config["tasks"] == 3 and rollouts.config["samples_per_task"] == 2
    assert "queued" in _run("load_demo") and Run.objects.count() == 2  # the follow-up is on its way

    rollouts = _execute(rollouts)
    assert demo.comparisons.count() > 0 and rollouts.created_by.username == "demo-admin"
    assert all(c.trajectory_a.policy_id == policy.pk for c in demo.comparisons.select_related("trajectory_a"))
    again = _run("load_demo")
    assert f"“Demo: encyclopedia QA”: {demo.comparisons.count()} comparisons of {policy}" in again
    assert Run.objects.count() == 2


def test_load_demo_with_a_policy_and_a_lost_follow_up_queues_the_rollouts_once(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    path = tiny_policy_dir(tmp_path / "policies" / "tiny-demo")
    policy = Policy.objects.create(name="tiny-demo", version="1", model_dir=str(path))
    _run("load_demo", "--policy", "tiny-demo", "--tasks", "3", "--samples", "2")
    _run("load_demo", "--policy", "tiny-demo", "--tasks", "3", "--samples", "2")
    assert not Run.objects.filter(kind="bc").exists()
    rollouts = Run.objects.get(kind="rollout")
    assert rollouts.status == "queued" and rollouts.config["policy_id"] == policy.pk
    # The worker died with it: the next start queues the rollouts again.
    Run.objects.filter(pk=rollouts.pk).update(status="failed")
    out = _run("load_demo", "--policy", "tiny-demo", "--tasks", "3", "--samples", "2")
    follow_up = Run.objects.filter(kind="rollout").exclude(pk=rollouts.pk).get()
    assert f"in run #{follow_up.pk} (queued)" in out
    _execute(follow_up)
    assert Campaign.objects.get(name="Demo: encyclopedia QA").comparisons.count() > 0


def test_set_role_creates_and_updates_users():
    _run("set_role", "lee", "annotator", "--password", "a-long-password-1")
    _run("set_role", "lee", "researcher")
    from django.contrib.auth import get_user_model

    lee = get_user_model().objects.get(username="lee")
    assert user_roles(lee) == {Role.RESEARCHER}
    assert lee.check_password("a-long-password-1")


def test_embedded_setup_runs_make_runs_steps_in_one_process_and_names_the_one_that_fails(tmp_path, monkeypatch):
    """Issue 56: `make run`'s set-up (migrations, static files, jobs cut off by the last stop) is
    one process that prints each step as it starts; what the steps say goes to the log."""
    import webapp.management.commands.embedded_setup as embedded_setup

    log = tmp_path / "start.log"
    run = Run.objects.create(kind="bc", status="running", heartbeat_at=timezone.now(), config={})
    out = _run("embedded_setup", "--orphaned", "--log", str(log))
    assert out.splitlines() == ["database migrations ...", "static files ...", "jobs cut off by the last stop ..."]
    assert "Failed 1 webapp.Run job(s)" in log.read_text()
    run.refresh_from_db()
    assert run.status == "failed"
    assert "jobs cut off" not in _run("embedded_setup", "--log", str(log))  # a shared database: the sweep decides

    def broken(command, **options):
        if command == "collectstatic":
            raise OSError("disk full")

    monkeypatch.setattr(embedded_setup, "call_command", broken)
    with pytest.raises(CommandError, match="static files failed: disk full"):
        _run("embedded_setup", "--log", str(log))
    assert "collectstatic failed: OSError('disk full')" in log.read_text()
