"""A behaviour-cloning run at tiny size, executed in-process as a worker would."""
from pathlib import Path

import pytest

from annotate.models import Policy
from webapp.models import Run
from webapp.runs.services import run_execute, run_launch

pytestmark = pytest.mark.django_db

TINY_BC = {"demos_per_task": 1, "extra_worlds": 0, "vocab_size": 400, "hidden": 32, "layers": 1, "heads": 2, "batch_size": 8,
           "max_steps": 4, "warmup_steps": 1, "max_seconds": 30}


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
