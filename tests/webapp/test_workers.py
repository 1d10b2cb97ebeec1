"""Live workers and a queued run's place in the line (webapp/workers.py), on pages and the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import start_worker, stop_worker, wait_for
from webapp.models import Run, WorkerBeat
from webapp.workers import queue_state, run_wait

pytestmark = pytest.mark.django_db


def _run(name: str, *, status=Run.Status.QUEUED, queued_ago: float = 0, **fields) -> Run:
    return Run.objects.create(
        kind="bc", name=name, status=status, queued_at=timezone.now() - timedelta(seconds=queued_ago), **fields
    )


def _beat(hostname: str, queues: str, *, ago: float) -> WorkerBeat:
    now = timezone.now()
    return WorkerBeat.objects.create(
        hostname=hostname, queues=queues, started_at=now - timedelta(hours=1), beat_at=now - timedelta(seconds=ago)
    )


def test_a_queued_run_knows_its_place_and_what_it_waits_for():
    busy = _run("policy", status=Run.Status.RUNNING, progress=0.25, started_at=timezone.now() - timedelta(minutes=10))
    first, second, third = _run("a", queued_ago=30), _run("b", queued_ago=20), _run("c", queued_ago=10)
    wait = run_wait(third)
    assert wait.position == 3 and [r.pk for r in wait.ahead] == [first.pk, second.pk]
    assert [r.pk for r in wait.running] == [busy.pk]
    assert wait.minutes_left == pytest.approx(30, abs=0.5)  # 10 min for a quarter: 30 to go
    assert run_wait(first).position == 1
    assert run_wait(busy) is None


def test_no_estimate_before_the_running_run_has_made_progress():
    _run("policy", status=Run.Status.RUNNING, progress=0.01, started_at=timezone.now())
    assert run_wait(_run("a")).minutes_left is None


def test_a_worker_is_alive_while_it_beats(settings):
    settings.WORKER_ALIVE_SECONDS = 30
    assert not queue_state("gpu").has_worker and queue_state("gpu").last_seen is None
    old = _beat("training@host", "gpu", ago=120)
    state = queue_state("gpu")
    assert not state.has_worker and state.last_seen == old.beat_at
    _beat("housekeeping@host", "default", ago=1)
    assert not queue_state("gpu").has_worker and queue_state("default").has_worker
    _beat("other@host", "default,gpu", ago=1)
    assert queue_state("gpu").has_worker


def test_the_runs_pages_say_when_no_worker_is_alive(client, admin_user, settings):
    settings.WORKER_ALIVE_SECONDS = 30
    client.force_login(admin_user)
    _run("policy", status=Run.Status.RUNNING, progress=0.5, started_at=timezone.now() - timedelta(minutes=4))
    queued = _run("reward model")
    _beat("training@host", settings.RUN_QUEUE, ago=300)
    page = client.get("/runs/").content.decode()
    assert "No worker alive" in page and "the last one was seen 5" in page
    detail = client.get(f"/runs/{queued.pk}/").content.decode()
    assert "No worker alive" in detail and "Next in the queue" in detail
    assert "busy with" in detail and "policy" in detail and "about 4 min left" in detail
    WorkerBeat.objects.update(beat_at=timezone.now())
    assert "No worker alive" not in client.get("/runs/").content.decode()


def test_the_api_says_where_a_queued_run_stands(admin_api, settings):
    settings.WORKER_ALIVE_SECONDS = 30
    ahead = _run("a", queued_ago=10)
    queued = _run("b")
    body = admin_api.get(f"/api/v1/runs/{queued.pk}?metrics=0").json()
    assert body["queue"] == {
        "position": 2,
        "ahead": [ahead.pk],
        "running": [],
        "minutes_left": None,
        "worker_alive": False,
    }
    Run.objects.filter(pk=queued.pk).update(status=Run.Status.RUNNING)
    assert admin_api.get(f"/api/v1/runs/{queued.pk}?metrics=0").json()["queue"] is None


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_beats_while_it_runs_and_leaves_when_it_stops():
    proc, log = start_worker(queues="beat-test", name="beating-worker", pool="solo")
    try:
        row = wait_for(lambda: WorkerBeat.objects.filter(hostname__startswith="beating-worker").first(), timeout=30)
        assert row.queue_names == ["beat-test"] and row.pid == proc.pid
        assert queue_state("beat-test").has_worker
    finally:
        stop_worker(proc, log)
    assert not WorkerBeat.objects.filter(hostname__startswith="beating-worker").exists()
