"""Helpers shared by the benchmark scripts: a scratch PostgreSQL database, migrated, and
`--set field=value` settings read as numbers, booleans or strings."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_setting(value: str):
    """A `--set` value: an int, else a float, else true/false, else the string."""
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(value.lower(), value)


def bench_database_url() -> str:
    """DATABASE_URL with `_bench` appended to the database name (never the real one)."""
    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arbiter")
    head, name = base.rsplit("/", 1)
    return f"{head}/{name}_bench"


def bench_env() -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": bench_database_url(),
        "ARBITER_VAR_DIR": str(ROOT / "var" / "bench"),
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "DEBUG": "false",
    }


def ensure_bench_database() -> dict[str, str]:
    """Create the scratch database afresh and migrate it; returns the environment to use."""
    import psycopg

    url = bench_database_url()
    head, name = url.rsplit("/", 1)
    with psycopg.connect(f"{head}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    env = bench_env()
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return env
