"""A test that times out inside a database query fails alone: the tests after it still pass.

Runs an inner pytest session (its own test database) with one test stuck in
`pg_sleep` past its timeout and one test after it that needs the same connection.
"""

import os
import subprocess
import sys
from pathlib import Path

import psycopg

from tests_env import SUFFIX

ROOT = Path(__file__).resolve().parents[2]

INNER = """
import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


@pytest.mark.timeout(2)
def test_stuck_in_a_query():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(60)")


def test_the_next_test_still_has_a_working_connection():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
"""


def test_a_timeout_in_a_query_fails_one_test_not_the_next(tmp_path):
    inner = tmp_path / "test_inner.py"
    inner.write_text(INNER)
    base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    name = f"arbiter_timeouts{SUFFIX.replace('-', '_')}"
    env = {**os.environ, "DATABASE_URL": f"{base}/{name}"}
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:  # whatever an earlier run left
        conn.execute(f'DROP DATABASE IF EXISTS "test_{name}" WITH (FORCE)')
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(ROOT / "pytest.ini"),
            "--rootdir",
            str(ROOT),
            "-q",
            "-p",
            "no:cacheprovider",
            "--no-migrations",
            "--create-db",
            # The 2 s limit is the stuck test's own, not its fixtures' (creating the test database
            # takes longer than that on a loaded machine).
            "-o",
            "timeout_func_only=true",
            str(inner),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    tail = result.stdout[-2000:] + result.stderr[-2000:]
    assert "1 failed, 1 passed" in result.stdout, tail
    assert "cancelled the query in flight" in result.stdout + result.stderr, tail
    assert "another command is already in progress" not in result.stdout, tail
    # Without the cancel the query kept running on the server and held the test database.
    assert "is being accessed by other users" not in result.stdout, tail
