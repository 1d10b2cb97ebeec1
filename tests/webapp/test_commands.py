"""The management commands, as an operator runs them."""
import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Campaign, Comparison, DatasetSnapshot, Policy, Trajectory
from tests.policy_fixtures import tiny_policy_dir
from tests.samples import canonical, chat_parallel, jsonl
from webapp.models import Run
from webapp.roles import Role, user_roles

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


def test_load_demo_is_idempotent_and_prints_users(settings):
    with pytest.raises(CommandError, match="build it with `manage.py train_policy`"):
        call_command("load_demo", "--policy", "tiny-demo")
    path = tiny_policy_dir(Path(settings.VAR_DIR) / "policies" / "tiny-demo")
    policy = Policy.objects.create(name="tiny-demo", version="1", model_dir=str(path))
    first = _run("load_demo", "--policy", "tiny-demo", "--tasks", "3", "--samples", "2")
    second = _run("load_demo", "--policy", "tiny-demo")
    assert "Demo campaign: 6 trajectories from tiny-demo@1" in first and "Simulated campaign" in first
    assert "Demo campaign" not in second and "Simulated campaign" not in second
    assert "demo-annotator" in second and "demo-admin" in second
    campaign = Campaign.objects.get(name="Demo: encyclopedia QA")
    assert campaign.comparisons.count() > 0
    assert all(c.trajectory_a.policy_id == policy.pk for c in campaign.comparisons.select_related("trajectory_a"))
    run = Run.objects.get(name="Demo rollouts")
    assert run.status == "succeeded" and run.created_by.username == "demo-admin"
    snapshot = DatasetSnapshot.objects.get(name="Demo: simulated labels")
    assert snapshot.status == "succeeded" and snapshot.stats["pairs"] > 100
    from django.contrib.auth import get_user_model

    assert user_roles(get_user_model().objects.get(username="demo-admin")) == {Role.ADMIN}


def test_set_role_creates_and_updates_users():
    _run("set_role", "lee", "annotator", "--password", "a-long-password-1")
    _run("set_role", "lee", "researcher")
    from django.contrib.auth import get_user_model

    lee = get_user_model().objects.get(username="lee")
    assert user_roles(lee) == {Role.RESEARCHER}
    assert lee.check_password("a-long-password-1")
