"""Test-run environment, loaded as a pytest plugin (`-p tests_env`) before Django reads its settings.

Tests run against the real PostgreSQL and Redis (DATABASE_URL, CELERY_BROKER_URL; the
defaults are this machine's services) with a storage folder of their own under
test-output/, which the Celery worker started by the tests shares.
"""
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parent
OUTPUT = ROOT / "test-output"

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arbiter")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")
os.environ["ARBITER_VAR_DIR"] = str(OUTPUT / "var")
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop beside live_server
# Hugging Face libraries stay offline and keep their caches inside the test folder.
os.environ["HF_HOME"] = str(OUTPUT / "hf-home")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

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
    for name, url, port in (
        ("PostgreSQL", os.environ["DATABASE_URL"], 5432),
        ("Redis", os.environ["CELERY_BROKER_URL"], 6379),
    ):
        if url.startswith(("sqlite", "filesystem")):
            continue
        host, port, ok = _reachable(url, port)
        if not ok:
            pytest.exit(
                f"{name} is not reachable at {host}:{port}; the tests need it. Start it with:\n"
                f"  {HOW_TO_START[name]}",
                returncode=3,
            )
