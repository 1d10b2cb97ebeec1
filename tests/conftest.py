"""Shared fixtures: users of each role, API clients, and a real Celery worker process."""

from __future__ import annotations

import functools
import inspect
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from tests.factories import UserFactory
from tests_env import SUFFIX

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-output"


@pytest.fixture
def annotator(db):
    return UserFactory(username="ann", roles=["annotator"])


@pytest.fixture
def researcher(db):
    return UserFactory(username="res", roles=["researcher"])


@pytest.fixture
def admin_user(db):
    return UserFactory(username="adm", roles=["admin"])


@pytest.fixture
def role_users(annotator, researcher, admin_user):
    return {"annotator": annotator, "researcher": researcher, "admin": admin_user}


def token_client(user) -> APIClient:
    client = APIClient()
    from webapp.tokens import api_token_create

    _, key = api_token_create(user=user, name=f"tests {uuid.uuid4().hex[:8]}")
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def api_rows(client, path: str) -> list:
    """Every row of an API list, following its `next` links (webapp/pagination.py)."""
    rows = []
    while path:
        response = client.get(path)
        assert response.status_code == 200, response.content[:300]
        rows += response.json()["results"]
        path = response.json()["next"]
    return rows


@pytest.fixture
def admin_api(admin_user):
    return token_client(admin_user)


def start_worker(
    *,
    queues: str = "default,gpu",
    name: str = "celery-worker",
    env_extra: dict | None = None,
    pool: str = "prefork",
    beat: bool = False,
):
    """Start a real `celery worker` process on the test database and broker; returns (process, log file)."""
    from arbiter.celery import app

    db = settings.DATABASES["default"]
    env = dict(os.environ)
    # Heartbeats every half second, so the sweeper below can tell a dead worker within seconds.
    env.setdefault("JOB_HEARTBEAT_SECONDS", "0.5")
    env["DATABASE_URL"] = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env.update(env_extra or {})
    log_path = ARTIFACTS / f"{name}{SUFFIX}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("w")
    hostname = f"{name}-{os.getpid()}@%h"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "arbiter",
            "worker",
            "-Q",
            queues,
            "--pool",
            pool,
            "--concurrency",
            "1",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--hostname",
            hostname,
            *(["--beat", "--schedule", str(ARTIFACTS / f"{name}{SUFFIX}-beat-schedule")] if beat else []),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the Celery worker exited at start; see {log_path}")
        if app.control.ping(destination=[hostname.replace("%h", socket.gethostname())], timeout=0.5):
            break
    else:
        proc.terminate()
        pytest.fail(f"the Celery worker did not answer within 60 s; see {log_path}")
    return proc, log


def stop_worker(proc, log) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker):
    """A real `celery worker` process on the test database and the test broker (both queues)."""
    from arbiter.celery import app

    app.control.purge()
    proc, log = start_worker()
    yield proc
    stop_worker(proc, log)


@pytest.fixture
def job_sweeper(django_db_setup):
    """Celery beat with a worker of its own that runs only the scheduled stale-job sweep, every second.

    Jobs count as stale after 8 s without a heartbeat (test workers beat every 0.5 s).
    """
    env = {
        "JOB_SWEEP_QUEUE": "sweep-test",
        "JOB_SWEEP_SECONDS": "1",
        "RUN_STALE_SECONDS": "8",
        "IMPORT_STALE_SECONDS": "8",
        "SNAPSHOT_STALE_SECONDS": "8",
    }
    proc, log = start_worker(queues="sweep-test", name="job-sweeper", env_extra=env, pool="solo", beat=True)
    yield proc
    stop_worker(proc, log)


def wait_for(predicate, *, timeout: float = 60, interval: float = 0.2):
    """Poll until `predicate()` is truthy; returns its value or fails the test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"condition not met within {timeout} s")


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """PBKDF2's deliberate slowness buys nothing in tests."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# --- The slow tests, marked by what they do ----------------------------------------------
# `make test-fast` runs `-m "not slow"`. Nobody has to remember the marker: a test is slow when
# it drives a browser or needs a worker (its markers), starts a process of the app, or trains or
# runs something heavy, in its own code, in a function of its own module it calls, or in any
# fixture it uses (their source is read).
SLOW_MARKERS = {"browser", "worker"}
SLOW_CALLS = re.compile(
    r"\b(train_bc|train_rl|train_reward_model|train_reward_ensemble|policy_train_default|run_execute|bc_start|rl_run|"
    r"run_in_process|start_worker|Embedded|chat_model_dir|registered_qwen|cloned_policy|calculator_policy|tiny_policy_dir|"
    r"simulated_snapshot|low_token_reward_model|tiny_gguf|gguf_convert|subprocess\.(run|Popen))\(|call_command\(\s*\"(run_pipeline|"
    r"train_policy|train_reward_model|register_policy|rollout_policy|load_demo)\""
)


def _source(function) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


@functools.cache
def _calls_something_slow(function) -> bool:
    """Whether the function's source makes a slow call, or a function of its own module that it
    calls does (`_run(...)` wrapping `subprocess.run`): read once per function, since a fixture
    or a parametrized test is shared by many items, and reading source is most of collection's time."""
    source = _source(function)
    return bool(SLOW_CALLS.search(source)) or any(
        SLOW_CALLS.search(_source(helper)) for helper in _module_helpers(function, source)
    )


def _module_helpers(function, source: str) -> list:
    """The functions defined in `function`'s module that its source calls by name (one level)."""
    module = inspect.getmodule(function)
    helpers = []
    for name in set(re.findall(r"\b([A-Za-z_]\w*)\(", source)):
        helper = getattr(module, name, None)
        if inspect.isfunction(helper) and helper is not function and helper.__module__ == module.__name__:
            helpers.append(helper)
    return helpers


def _is_slow(item) -> bool:
    if SLOW_MARKERS & {mark.name for mark in item.iter_markers()}:
        return True
    if _calls_something_slow(getattr(item, "function", None)):
        return True
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
    return any(_calls_something_slow(d.func) for defs in definitions.values() for d in defs)


def pytest_collection_modifyitems(config, items):
    slow = set()
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
            slow.add(item.nodeid)
    # The slow tests first (each group in its own order, so a module's tests stay together): the
    # test workers then end on short tests, not one waiting for the other's long one.
    items.sort(key=lambda item: item.nodeid not in slow)
