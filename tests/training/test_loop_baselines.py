"""The loop's baselines (issue 54): `run_pipeline --baselines filtered_bc,clean_bc` behaviour-clones,
in round one, the start's own settings changed only in what is imitated (only the demonstrator's
successful episodes; a demonstrator without habits or slips), and every round's before/after has
them as rows beside the methods. Unknown names are refused before anything runs."""

import json

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from annotate.models import Policy
from tests.factories import UserFactory
from tests.helpers import TINY_LOOP_ARGUMENTS
from training.loop.config import PipelineConfig
from training.loop.rounds import _evaluation_config, loop_config, round_next
from training.models import LoopRound
from training.pipeline import pipeline_problems
from webapp.models import Run

pytestmark = [pytest.mark.django_db(transaction=True)]

TINY_BC = {"hidden": 48, "layers": 2, "heads": 2, "max_steps": 4, "warmup_steps": 1, "batch_size": 8, "dev_every": 0}


@pytest.fixture(scope="module")
def _start_row(tmp_path_factory, django_db_setup, django_db_blocker) -> dict:
    """A tiny behaviour-cloned start, trained once for the module (each test empties the tables,
    so each registers the row again)."""
    from training.policy.bc_config import BCConfig
    from training.policy.services import policy_train_default

    config = BCConfig(**TINY_BC | {"max_steps": 120, "warmup_steps": 5}, vocab_size=512, extra_worlds=0)
    with django_db_blocker.unblock():
        policy = policy_train_default(
            config=config, name="tiny-start", target=tmp_path_factory.mktemp("baselines") / "start", log=lambda m: None
        )
        row = {field: getattr(policy, field) for field in ("name", "version", "model_dir", "metadata")}
        policy.delete()
    return row


def test_filtered_and_clean_behaviour_cloning_are_rows_of_every_round(_start_row, tmp_path, capsys):
    start = Policy.objects.create(**_start_row)
    out = tmp_path / "loop.json"
    call_command(
        "run_pipeline",
        "--name",
        "bl",
        "--policy-id",
        str(start.pk),
        "--baselines",
        "clean_bc, filtered_bc",
        "--bc",
        json.dumps(TINY_BC),
        "--bc-extra-worlds",
        "0",
        "--eval-seen-tasks",
        "0",
        *TINY_LOOP_ARGUMENTS,
        "--seed",
        "3",
        "--json",
        str(out),
    )
    printed = capsys.readouterr().out
    # The start was given: the baselines take the pipeline's own behaviour cloning settings, said in the plan.
    assert "Plan: baselines: the start is policy" in printed and "not cloned here" in printed
    runs = {run.name: run for run in Run.objects.filter(kind="bc")}
    assert set(runs) == {"bl filtered BC", "bl clean BC"}
    assert all(run.status == "succeeded" for run in runs.values())
    filtered, clean = runs["bl filtered BC"].config, runs["bl clean BC"].config
    assert (filtered["demonstrations"], filtered["demonstrator"]) == ("successful", "habits")
    assert (clean["demonstrations"], clean["demonstrator"]) == ("all", "clean")
    differ = {"demonstrations", "demonstrator", "policy_name"}
    assert {k: v for k, v in filtered.items() if k not in differ} == {k: v for k, v in clean.items() if k not in differ}
    assert filtered["environment"] == "encyclopedia" and filtered["extra_worlds"] == 0 and filtered["seed"] == 3
    assert filtered["max_steps"] == TINY_BC["max_steps"]  # the loop's --bc settings, as the start's cloning takes them
    # Cloned into a fresh model with the start's tokenizer: the evaluation plays only policies that share it.
    base = Policy.objects.get(pk=filtered["base_policy_id"])
    assert base.metadata["tokenizer_of"] == start.pk
    policies = {name: run.summary["policy_id"] for name, run in runs.items()}
    first = LoopRound.objects.get(loop="bl")
    assert first.evaluation.reference_policy == start
    assert set(policies.values()) <= {e.policy_id for e in first.evaluation.entries.all()}
    # A later round is read against round one's start too, so its before/after has them.
    second = round_next(previous=first, labels="simulated", user=first.created_by)
    settings = _evaluation_config(second, loop_config(second), stage=None, user=None, should_stop=None)
    assert settings["baseline_policy_id"] == start.pk
    assert set(policies.values()) <= {int(p) for p in settings["policy_ids"].split(",")}
    # The page names how each was made; the command's loop table has them as rows.
    client = Client()
    client.force_login(UserFactory(roles=["admin"]))
    page = client.get(f"/training/evaluations/{first.evaluation_id}/").content.decode()
    assert "successful demonstrations only (filtered)" in page and "on a clean demonstrator" in page
    assert any(line.startswith("filtered BC ") for line in printed.splitlines())
    assert any(line.startswith("clean BC ") for line in printed.splitlines())
    report = json.loads(out.read_text())
    assert [b["label"] for b in report["baselines"]] == ["filtered BC", "clean BC"]
    assert report["baselines"][0]["policy_id"] == policies["bl filtered BC"]
    assert report["seconds"]["round 1 baselines"] > 0


def test_unknown_baselines_and_loop_owned_bc_settings_are_refused_before_anything_runs():
    problems = pipeline_problems(PipelineConfig(baselines="filtered_bc,sloppy_bc", bc={"seed": 4, "max_steps": -1}))
    assert "baselines: any of filtered_bc, clean_bc, comma-separated; 'sloppy_bc' is not one." in problems
    assert "bc: seed is set by the loop (--seed)." in problems
    assert any(p.startswith("BC settings: max_steps") for p in problems)
    assert not [p for p in pipeline_problems(PipelineConfig(baselines="clean_bc")) if "baselines" in p]
    with pytest.raises(CommandError, match="baselines: any of filtered_bc, clean_bc"):
        call_command("run_pipeline", "--baselines", "filtered")
    with pytest.raises(CommandError, match="bc: takes a JSON object"):
        call_command("run_pipeline", "--bc", "[1]")
    assert not Run.objects.exists()
