"""Helpers shared by the benchmark scripts: a scratch PostgreSQL database, migrated, a free
port, gunicorn started on it and stopped by its PID, and `--set field=value` settings read as
numbers, booleans or strings.

The scratch database lives on the server of DATABASE_URL and is named by the script's
`--database` flag, else by ARBITER_BENCH_DATABASE, else by DATABASE_URL's name with `_bench`
appended. Scripts drop and re-create it, so it is marked (a comment on the database) when
created, and an existing database that carries no mark is refused rather than dropped: a
typo in `--database` cannot empty a real one. The one exception is the default name, which
benchmarks created unmarked before the mark existed.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from core.configs import config_from_input

ROOT = Path(__file__).resolve().parent.parent
DATABASE_ENV = "ARBITER_BENCH_DATABASE"
PORT_ENV = "ARBITER_BENCH_PORT"
MARK = "arbiter benchmark scratch database: dropped and re-created by benchmarks/*.py"


def parse_setting(value: str):
    """A `--set` value: an int, else a float, else true/false, else the string."""
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(value.lower(), value)


def markdown_table(header: list[str], rows: list[list]) -> str:
    """A markdown table of these rows under this header (cells as str() gives them), the form
    the benchmarks print their figures in."""
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(str(cell) for cell in line) + " |" for line in lines)


def config_from_settings(parser: argparse.ArgumentParser, settings: list[str], config_class):
    """(`config_class` with the `--set field=value` settings, the settings as given), each value
    read as the API reads a config (core.configs.config_from_input); an unknown field or a bad
    value is the parser's error."""
    overrides = dict(kv.split("=", 1) for kv in settings)
    try:
        return config_from_input(config_class, overrides), overrides
    except ValueError as exc:
        parser.error(" ".join(str(exc).splitlines()))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def gunicorn_start(
    env: dict, port: int, *, workers: int, threads: int, worker_class: str = "gthread", extra: tuple = ()
) -> subprocess.Popen:
    """The app under gunicorn on 127.0.0.1:port, in a process session of its own, once /health
    answers (90 s at most); stop it with `gunicorn_stop`."""
    command = [str(ROOT / ".venv/bin/gunicorn"), "arbiter.wsgi", "--bind", f"127.0.0.1:{port}"]
    command += ["-k", worker_class, "--workers", str(workers), "--threads", str(threads), "--log-level", "warning"]
    server = subprocess.Popen([*command, *extra], cwd=ROOT, env=env, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and server.poll() is None:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.2)
    gunicorn_stop(server)
    raise SystemExit(
        f"gunicorn on 127.0.0.1:{port} did not answer /health within 90 s "
        f"(exit status {server.returncode}; is the port taken?)"
    )


def gunicorn_stop(server: subprocess.Popen) -> None:
    """gunicorn's master and its workers, by the session the master leads."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def add_port_argument(parser: argparse.ArgumentParser, what: str) -> None:
    default = int(os.environ.get(PORT_ENV) or 0)
    parser.add_argument(
        "--port",
        type=int,
        default=default,
        help=f"port on 127.0.0.1 for {what} (default: ${PORT_ENV}, else a free port chosen at start)",
    )


def base_database_url() -> str:
    return os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arbiter")


def default_bench_database(suffix: str = "_bench") -> str:
    """DATABASE_URL's database name with `suffix` appended (never the real one)."""
    return base_database_url().rsplit("/", 1)[1] + suffix


def add_database_argument(parser: argparse.ArgumentParser) -> None:
    """`--database NAME`, with help that says the script drops and re-creates it."""
    default = os.environ.get(DATABASE_ENV) or default_bench_database()
    parser.add_argument(
        "--database",
        default=default,
        metavar="NAME",
        help=f"scratch PostgreSQL database, on DATABASE_URL's server, that this script DROPS and re-creates "
        f"(default: ${DATABASE_ENV}, else DATABASE_URL's name + '_bench': {default}). An existing database "
        f"that a benchmark did not create is refused, never dropped.",
    )


def bench_database_url(database: str | None = None) -> str:
    head = base_database_url().rsplit("/", 1)[0]
    return f"{head}/{database or os.environ.get(DATABASE_ENV) or default_bench_database()}"


def bench_env(database: str | None = None) -> dict[str, str]:
    """The environment of a process that works on the scratch database (and a storage folder of its own)."""
    url = bench_database_url(database)
    name = url.rsplit("/", 1)[1]
    return {
        **os.environ,
        "DATABASE_URL": url,
        "ARBITER_VAR_DIR": str(ROOT / "var" / ("bench" if name == "arbiter_bench" else f"bench-{name}")),
        "DJANGO_SETTINGS_MODULE": "arbiter.settings",
        "DEBUG": "false",
    }


def ensure_bench_database(database: str | None = None) -> dict[str, str]:
    """Create the scratch database afresh and migrate it; returns the environment to use.

    Drops it first only if a benchmark made it (its mark, or the default name); any other
    database of that name stops the script with a message.
    """
    import psycopg
    from psycopg import sql

    url = bench_database_url(database)
    head, name = url.rsplit("/", 1)
    if name == base_database_url().rsplit("/", 1)[1]:
        raise SystemExit(
            f"the scratch database cannot be DATABASE_URL's own database ({name}): name another "
            f"with --database or ${DATABASE_ENV}"
        )
    with psycopg.connect(f"{head}/postgres", autocommit=True) as conn:
        found = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", (name,)
        ).fetchone()
        if found is not None and found[0] != MARK and name != default_bench_database():
            raise SystemExit(
                f"database {name!r} exists and no benchmark created it, so it is not dropped. Name another with "
                f"--database or ${DATABASE_ENV}, or drop it yourself if it is scratch."
            )
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name), sql.Literal(MARK)))
    env = bench_env(name)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return env
