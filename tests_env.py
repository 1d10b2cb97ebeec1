"""Test-run environment, loaded as a pytest plugin (`-p tests_env`) before Django reads its settings.

Tests run against the real PostgreSQL and Redis (DATABASE_URL, CELERY_BROKER_URL; the
defaults are this machine's services) with a storage folder of their own under
test-output/, which the Celery worker started by the tests shares.
"""

import os
import shutil
import signal
import socket
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parent
OUTPUT = ROOT / "test-output"

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arbiter")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")
# The suite's fake model servers listen on 127.0.0.1 (tests/fake_openai.py); the refusal of such
# addresses is tested with the setting off (tests/training/test_judge_addresses.py).
os.environ.setdefault("JUDGE_ALLOW_PRIVATE_ADDRESSES", "true")
_DATABASE = urlparse(os.environ["DATABASE_URL"]).path.strip("/") or "default"

# --- Tests side by side: `make test` runs pytest-xdist workers (gw0, gw1, ...) ---------------
# pytest-django gives each worker its own test database (test_<name>_gw0); everything else a
# worker shares with the machine is made its own here, before Django reads its settings: the
# storage folder, the Redis database of its Celery broker (so one worker's Celery processes never
# take another's tasks or answer its pings), and the scratch databases of the benchmark scripts.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
SUFFIX = f"-{WORKER}" if WORKER else ""


def _broker_of_worker(url: str, worker: str) -> str:
    """The Redis URL's database number moved down by the worker's index (15, 14, ... for gw0, gw1, ...)."""
    parsed = urlparse(url)
    if not worker or parsed.scheme not in ("redis", "rediss"):
        return url
    base = int(parsed.path.strip("/") or 0)
    return parsed._replace(path=f"/{(base - int(worker.removeprefix('gw'))) % 16}").geturl()


if WORKER:
    # From the run's own broker URL, kept aside, so a pytest started by a test moves it only once.
    _BROKER = os.environ.setdefault("ARBITER_TEST_RUN_BROKER_URL", os.environ["CELERY_BROKER_URL"])
    os.environ["CELERY_BROKER_URL"] = _broker_of_worker(_BROKER, WORKER)
    os.environ.setdefault("ARBITER_BENCH_DATABASE", f"{_DATABASE}_bench_{WORKER}")
    os.environ.setdefault("ARBITER_FUZZ_DATABASE", f"{_DATABASE}_fuzz_{WORKER}")

# A storage folder per database (and worker), so two test runs side by side never read each
# other's files; emptied when a run starts (pytest_configure), so no model or run folder left by an
# earlier run can make a test pass.
VAR_DIR = OUTPUT / (("var" if _DATABASE == "arbiter" else f"var-{_DATABASE}") + SUFFIX)
os.environ["ARBITER_VAR_DIR"] = str(VAR_DIR)
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop beside live_server
# One SECRET_KEY for the suite and the workers it starts, as a deployment shares one (a stored
# judge key is sealed with it); the storage folder, where one would be generated, is emptied below.
os.environ.setdefault("SECRET_KEY", "arbiter-test-suite-only-not-a-secret")
# Hugging Face libraries stay offline and keep their caches inside the test folder.
os.environ["HF_HOME"] = str(OUTPUT / "hf-home")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
# One torch thread in the test process and the workers it starts: on a busy 2-core machine
# torch's default of 2 threads made rollouts ~10x slower (benchmarks/RESULTS.md).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("ARBITER_ENVIRONMENT_MODULES", "tests")  # the suite's own environments, by dotted path
os.environ.setdefault("MKL_NUM_THREADS", "1")

HOW_TO_START = {
    "PostgreSQL": "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    "Redis": 'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" '
    "--appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log",
}


def _reachable(url: str, default_port: int) -> tuple[str, int, bool]:
    parsed = urlparse(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or default_port
    try:
        socket.create_connection((host, port), timeout=2).close()
        return host, port, True
    except OSError:
        return host, port, False


def pytest_configure(config):
    if VAR_DIR.exists():
        shutil.rmtree(VAR_DIR, ignore_errors=True)
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    for name, url, port in (
        ("PostgreSQL", os.environ["DATABASE_URL"], 5432),
        ("Redis", os.environ["CELERY_BROKER_URL"], 6379),
    ):
        if url.startswith(("sqlite", "filesystem")):
            continue
        host, port, ok = _reachable(url, port)
        if not ok:
            pytest.exit(
                f"{name} is not reachable at {host}:{port}; the tests need it. Start it with:\n  {HOW_TO_START[name]}",
                returncode=3,
            )


# --- Timeouts that fail one test, not the ones after it ----------------------------------
# pytest-timeout's signal method raises wherever the test happens to be. Inside a database
# query that leaves the shared psycopg connection mid-command ("another command is already
# in progress"), and every later test that touches the database errors. Here the timer
# first cancels a query in flight on the server: the query then fails with QueryCanceled,
# the test fails with it, and the connection is left in a state its rollback can clear.
# Only if nothing was in flight (or the cancel did not help within 10 s) does it raise.


def _cancel_running_queries() -> bool:
    try:
        import psycopg
        from django.db import connections
    except Exception:
        return False
    cancelled = False
    for conn in connections.all(initialized_only=True):
        raw = getattr(conn, "connection", None)
        pgconn = getattr(raw, "pgconn", None)
        if pgconn is not None and pgconn.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
            try:
                raw.cancel_safe(timeout=3)
                cancelled = True
            except Exception:
                pass
    return cancelled


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    if settings.method != "signal" or not settings.timeout or not hasattr(signal, "SIGALRM"):
        return None
    state = {"cancelled": False}

    def on_alarm(signum, frame):
        if not state["cancelled"] and _cancel_running_queries():
            state["cancelled"] = True
            sys.stderr.write(f"\nTimeout >{settings.timeout}s in {item.nodeid}: cancelled the query in flight\n")
            signal.setitimer(signal.ITIMER_REAL, 10)
            return
        pytest.fail(f"Timeout >{settings.timeout}s", pytrace=False)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_cancel_timer(item):
    if hasattr(signal, "SIGALRM"):
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    return True
