"""The web process never imports or starts an agent environment (issue 45): a worker may hold
servers and paths the web host has none of, and a hung environment must not hold a web thread.

A real gunicorn serves the labeling screen of encyclopedia comparisons (the tools it shows come
from what a worker stored), takes a correction (its replay queued for a worker), launches a
behaviour cloning run (its environment checked by name; the worker checks the rest at start)
and refuses an unknown environment; when it stops, its worker process lists the modules it
imported, and no environment's module is among them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from django.conf import settings

from annotate.models import Correction, CorrectionReplay, EnvironmentTools
from annotate.services.assignments import assignment_next
from tests.factories import CampaignFactory, UserFactory
from training.envs.services import environment_describe
from training.simulation import scripted_trajectories_generate
from webapp.tokens import api_token_create

pytestmark = pytest.mark.django_db

# An environment's own code: the built-ins' modules and the MCP client (which starts servers).
ENVIRONMENT_MODULES = (
    "training.envs.encyclopedia",
    "training.envs.arithmetic",
    "training.envs.codeword",
    "training.envs.mcp",
    "mcp",
)

GUNICORN_HOOK = """
import json, os, sys

def worker_exit(server, worker):
    with open(os.environ["ARBITER_TEST_MODULES_OUT"], "w") as out:
        json.dump(sorted(sys.modules), out)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url: str, key: str, body: dict | None = None) -> tuple[int, dict | str]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET")
    request.add_header("Authorization", f"Token {key}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


@pytest.fixture
def web(tmp_path):
    """gunicorn arbiter.wsgi on the test database; yields (base url, file its worker's modules go to)."""
    db = settings.DATABASES["default"]
    port = _free_port()
    (tmp_path / "hook.py").write_text(GUNICORN_HOOK)
    modules_out = tmp_path / "modules.json"
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "ARBITER_TEST_MODULES_OUT": str(modules_out),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "arbiter.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1"]
        + ["--threads", "2", "--config", str(tmp_path / "hook.py"), "--timeout", "60"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "gunicorn.log", "w"),  # noqa: SIM115 - closed with the process
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=2)
            break
        except urllib.error.HTTPError:
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"gunicorn exited at start: {(tmp_path / 'gunicorn.log').read_text()[-2000:]}")
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("gunicorn did not answer within 60 s")
    try:
        yield url, modules_out, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.django_db(transaction=True)
def test_the_web_process_never_imports_or_starts_an_environment(web):
    url, modules_out, proc = web
    campaign = CampaignFactory(votes_per_comparison=1)
    scripted_trajectories_generate(campaign=campaign, n_tasks=2, seed=3)  # as a worker's rollout would
    # The describe job a worker runs (this process may have built the encyclopedia in an earlier
    # test, whose stored tools that test's database flush removed).
    environment_describe("encyclopedia")
    assert EnvironmentTools.objects.get(name="encyclopedia").tools
    annotator, admin = UserFactory(roles=["annotator"]), UserFactory(roles=["admin"])
    assignment = assignment_next(campaign=campaign, annotator=annotator)
    _, annotator_key = api_token_create(user=annotator, name="web test")
    _, admin_key = api_token_create(user=admin, name="web test")

    # The labeling screen, with the correction form's tools (from the stored description).
    from django.test import Client

    session = Client()
    session.force_login(annotator)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    request = urllib.request.Request(f"{url}/annotate/campaigns/{campaign.pk}/label/")
    request.add_header("Cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}")
    with urllib.request.urlopen(request, timeout=30) as response:
        page = response.read().decode()
    assert 'id="correction-tools"' in page and '<option value="search">' in page

    # A correction: stored as edited, its replay queued for a worker.
    status, body = _request(
        f"{url}/api/v1/assignments/{assignment.pk}/correction",
        annotator_key,
        {"side": "left", "kind": "answer", "answer": "Someone else entirely"},
    )
    assert status == 201, body
    assert body["replay"]["state"] == "queued" and body["replayed"] is False
    # Queued for a worker (one of another test of this run may already have taken it).
    assert CorrectionReplay.objects.filter(correction=Correction.objects.get()).exists()

    # A run in the encyclopedia: checked by name here (no worker runs in this test: it stays queued).
    status, body = _request(f"{url}/api/v1/runs/", admin_key, {"kind": "bc", "config": {"environment": "encyclopedia"}})
    assert status == 201, body
    status, body = _request(f"{url}/api/v1/runs/", admin_key, {"kind": "bc", "config": {"environment": "atlantis"}})
    assert status == 400 and "atlantis" in json.dumps(body) and "not an environment" in json.dumps(body)

    proc.send_signal(signal.SIGTERM)  # its worker writes the modules it imported as it exits
    proc.wait(timeout=30)
    imported = json.loads(modules_out.read_text())
    assert "arbiter.wsgi" in imported and "annotate.views" in imported  # it served the pages above
    environment_code = [m for m in imported if m.startswith(ENVIRONMENT_MODULES) and m.split(".")[0] != "annotate"]
    assert environment_code == [], environment_code


@pytest.fixture
def web_process(monkeypatch):
    """This test process marked as the web process (what arbiter/wsgi.py does)."""
    monkeypatch.setattr("webapp.process_role._web", True)


def test_in_the_web_process_an_environment_is_refused_and_checks_read_names(web_process):
    from training.envs.services import NotInTheWebProcess, environment_get, environment_problems
    from training.run_kinds.common import environment_check

    with pytest.raises(NotInTheWebProcess):
        environment_get("arithmetic")
    assert environment_problems("arithmetic") == [] and environment_check("encyclopedia", "eval", "no-such-task") == []
    (problem,) = environment_problems("atlantis")
    assert "'atlantis' is not an environment this deployment knows" in problem
    (problem,) = environment_problems("os:system")  # a dotted path outside ARBITER_ENVIRONMENT_MODULES
    assert "ARBITER_ENVIRONMENT_MODULES" in problem


def test_the_worker_checks_at_start_what_the_web_process_could_not(web_process, admin_user, monkeypatch):
    """A run whose tasks are not of its environment is accepted by name in the web process and
    failed when a worker starts it, with the reason."""
    from tests.factories import PolicyFactory
    from webapp.models import Run
    from webapp.runs.services import run_execute, run_launch

    policy = PolicyFactory(model_dir="/nonexistent")
    monkeypatch.setattr("training.run_kinds.agent.policy_problems", lambda policy_id: [])
    config = {"policy_id": policy.pk, "environment": "arithmetic", "split": "eval", "task_ids": "no-such-task"}
    run = run_launch(kind="rollout", config=config, user=admin_user, enqueue=False)
    monkeypatch.setattr("webapp.process_role._web", False)  # now the worker
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and "'no-such-task' is not a task of environment" in run.error


def test_a_worker_stores_an_environments_tools_and_an_import_asks_for_unknown_ones(
    django_capture_on_commit_callbacks, monkeypatch
):
    from annotate.services.imports import trajectories_import_objects
    from training.envs.services import environment_describe

    environment_describe("arithmetic")
    assert [t["function"]["name"] for t in EnvironmentTools.objects.get(name="arithmetic").tools] == [
        "calculate",
        "answer",
    ]
    environment_describe("atlantis")
    assert EnvironmentTools.objects.get(name="atlantis").tools is None
    assert "atlantis" in EnvironmentTools.objects.get(name="atlantis").error
    sent = []
    monkeypatch.setattr("arbiter.celery.app.send_task", lambda name, args, queue: sent.append((name, args, queue)))
    line = {
        "schema": "arbiter.trajectory/v1",
        "task": {"external_id": "t1", "prompt": "Find it.", "environment": "ticket-desk"},
        "agent": {"name": "a"},
        "steps": [{"kind": "answer", "text": "x"}],
        "answer": "x",
    }
    with django_capture_on_commit_callbacks(execute=True):
        trajectories_import_objects(objects=[line, {**line, "task": {**line["task"], "environment": "arithmetic"}}])
    assert sent == [("environments.describe", ["ticket-desk"], "default")]  # arithmetic is described already
