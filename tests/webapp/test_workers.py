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
        "queue": settings.RUN_QUEUE,
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


def test_a_run_waits_only_for_its_own_queue_and_an_in_process_run_holds_no_worker():
    """A rubric judge (housekeeping queue) does not wait behind training on the run queue, and a
    run run_pipeline executes in its own process is not counted as the worker's."""
    training = _run("policy", status=Run.Status.RUNNING, progress=0.5, started_at=timezone.now())
    _run("in the pipeline's process", status=Run.Status.RUNNING, queue="in-process", started_at=timezone.now())
    _run("queued training", queued_ago=30)
    light = _run("rubric judge", queued_ago=10, queue="default")
    wait = run_wait(light)
    assert wait.position == 1 and wait.ahead == [] and wait.running == []
    heavy = run_wait(_run("another training", queued_ago=5))
    assert heavy.position == 2 and [r.pk for r in heavy.running] == [training.pk]


def test_a_run_that_loads_no_model_is_sent_to_the_housekeeping_queue(admin_user, monkeypatch, settings):
    """Where each run kind's run goes: a rubric or chat judge to `default`, a reward-model judge
    and every training run to RUN_QUEUE; a run executed in-process to no queue, and a resume of it
    to its kind's queue."""
    from annotate.models import Judge
    from tests.training.judge_fixtures import rubric_campaign
    from webapp.runs import services
    from webapp.runs.services import run_launch

    sent = []
    monkeypatch.setattr(services, "_enqueue", lambda run: sent.append((run.pk, run.queue)))
    campaign = rubric_campaign(n=2)
    rubric = Judge.objects.create(name="rubric", kind="rubric")
    with monkeypatch.context() as patched:
        patched.setattr("django.db.transaction.on_commit", lambda fn, *a, **k: fn())
        judged = run_launch(kind="judge", config={"judge_id": rubric.pk, "campaign_id": campaign.pk}, user=admin_user)
        local = run_launch(
            kind="judge", config={"judge_id": rubric.pk, "campaign_id": campaign.pk}, user=admin_user, enqueue=False
        )
    assert judged.queue == "default" and sent == [(judged.pk, "default")]
    assert local.queue == "in-process" and len(sent) == 1
    assert services.run_queue_for(services.get_kind("bc"), None) == settings.RUN_QUEUE
