"""One job lifecycle for every job kind (webapp/jobs.py, issue 30): claimed once, ended once by
its worker (over the stale sweep's guess, never over another attempt), and a failed job stays."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotate.models import CampaignFill, DatasetSnapshot, ImportBatch
from webapp.jobs import job_claim, job_finish
from webapp.models import Run

pytestmark = pytest.mark.django_db


def _run(**fields) -> Run:
    return Run.objects.create(kind="rollout", name="r", config={}, **fields)


def test_a_queued_job_is_claimed_once_and_only_by_its_attempt():
    run = _run(status="queued", attempt=2)
    assert not job_claim(Run, run.pk, attempt=1)
    assert job_claim(Run, run.pk, attempt=2)
    assert not job_claim(Run, run.pk, attempt=2)  # a second worker finds it taken
    run.refresh_from_db()
    assert run.status == "running" and run.started_at and run.heartbeat_at


def test_the_workers_end_is_written_once_over_running_or_the_sweeps_guess_never_over_another_attempt():
    now = timezone.now()
    run = _run(status="running", attempt=1, heartbeat_at=now)
    assert not job_finish(Run, run.pk, status="succeeded", guard={"attempt": 2})
    assert job_finish(Run, run.pk, status="succeeded", guard={"attempt": 1}, progress_message="Done.")
    assert not job_finish(Run, run.pk, status="failed", guard={"attempt": 1})  # ended already
    swept = _run(
        status="failed",
        attempt=1,
        heartbeat_at=now - timedelta(minutes=5),
        finished_at=now,
        error="Its worker stopped sending heartbeats",
    )
    assert job_finish(Run, swept.pk, status="succeeded", guard={"attempt": 1})  # it was alive: its word stands
    swept.refresh_from_db()
    assert swept.status == "succeeded"


@pytest.mark.parametrize("model", [ImportBatch, DatasetSnapshot, CampaignFill, Run])
def test_every_job_kind_has_the_lifecycles_fields(model):
    names = {f.name for f in model._meta.get_fields()}
    assert {"status", "started_at", "finished_at", "heartbeat_at", "error"} <= names
