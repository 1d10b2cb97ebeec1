"""`make run` (scripts/run_embedded.sh) keeps the app up: a worker that dies is restarted and says
why, one that keeps dying is left stopped while the web server stays up and says so; Ctrl-C in a
terminal, or a SIGINT to a launcher in the background, stops everything with status 0."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from benchmarks.first_run import Embedded, answers, free_port
from benchmarks.soak_embedded import Api, token

pytestmark = pytest.mark.worker


def _pids(group: int, marker: str) -> list[int]:
    """Processes of the script's group whose command line contains `marker`."""
    out = subprocess.run(["ps", "-ww", "-e", "-o", "pid=,pgid=,args="], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if int(line.split()[1]) == group and marker in line]


def _queues(api: Api) -> dict:
    status, body = api.call("GET", "/api/v1/workers/")
    assert status == 200, body
    return body["queues"]


def _kill_training_worker(app: Embedded, api: Api) -> None:
    """Once it is up and beating: SIGKILL, as the kernel's OOM killer would."""
    app.wait_for(lambda: _queues(api)["gpu"]["alive"] == 1, 60, "a training worker beating")
    pids = app.wait_for_value(lambda: _pids(app.proc.pid, "--hostname training@"), 60, "a training worker")
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


def _assert_private(var) -> None:
    """Issue 45: the storage folder (the database with the signed-in users' sessions, the secret
    key, logs) is its owner's alone: the folder 0700, nothing in it readable by group or others
    but the public static assets (unreachable through the folder anyway),
    and, where the suite runs as root, another user cannot read the database."""
    assert var.stat().st_mode & 0o777 == 0o700, oct(var.stat().st_mode)
    static = var / "staticfiles"  # the site's public assets (CSS, icons), copied with their modes
    shared = [
        str(p) for p in var.rglob("*") if not p.is_symlink() and p.stat().st_mode & 0o077 and static not in p.parents
    ]
    assert not shared, shared
    if os.geteuid() == 0 and subprocess.run(["id", "nobody"], capture_output=True).returncode == 0:
        read = subprocess.run(
            ["su", "nobody", "-s", "/bin/sh", "-c", f"cat '{var / 'arbiter.sqlite3'}' > /dev/null"],
            capture_output=True,
            text=True,
        )
        assert read.returncode != 0 and "Permission denied" in read.stderr, read


def test_a_dying_worker_is_restarted_then_left_stopped_with_the_web_server_up(tmp_path):
    env = {"ARBITER_RESTARTS": "1", "WORKER_BEAT_SECONDS": "0.5", "WORKER_ALIVE_SECONDS": "2"}
    app = Embedded(tmp_path / "var", free_port(), tmp_path / "out.txt", env_extra=env)
    try:
        app.wait_for(app.banner, 120, "URL and users printed")
        output = app.output.read_text()
        assert "worker-training.log" in output and "worker-housekeeping.log" in output

        _assert_private(tmp_path / "var")
        api = Api(app, token(app, "demo-admin"))
        _kill_training_worker(app, api)
        app.wait_for(lambda: "restarting it (1 of 1" in app.output.read_text(), 30, "a restart")
        assert "the training process stopped (exit status 137)" in app.output.read_text()
        time.sleep(2.5)  # the first worker's row goes stale, so the next "alive" is the new one's
        _kill_training_worker(app, api)
        app.wait_for(lambda: "not restarting it again" in app.output.read_text(), 30, "giving up")
        assert "The web server stays up" in app.output.read_text()

        assert answers(app.url("/health"))
        time.sleep(2.5)  # past WORKER_ALIVE_SECONDS without a beat from any training worker
        queues = _queues(api)
        assert queues["gpu"]["alive"] == 0 and queues["gpu"]["last_seen"]
        assert queues["default"]["alive"] == 1  # the housekeeping worker, untouched
        assert app.proc.poll() is None  # the script itself is still up
        app.interrupt()  # Ctrl-C: a normal end, so `make run` prints no "Error 130"
        assert app.proc.returncode == 0, app.proc.returncode
    finally:
        if app.proc.poll() is None:
            app.interrupt()
        app.kill()
    deadline = time.monotonic() + 15  # nothing of it left, once the killed ones are reaped
    while _pids(app.proc.pid, "") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _pids(app.proc.pid, "")


def test_an_mcp_environment_runs_on_the_embedded_worker(tmp_path):
    """`make run` as a new user runs it (SQLite, the filesystem broker, the training worker's
    stderr a logging proxy): a rollout over a stdio MCP server succeeds, and a server that keeps
    dying fails its run with the reason, storing nothing."""
    import json
    import re
    import sys

    from benchmarks.first_run import ROOT
    from tests.helpers import calculator_environments, calculator_policy

    environments = tmp_path / "environments.json"
    environments.write_text(json.dumps(calculator_environments(tmp_path)))
    env = {"ARBITER_ENVIRONMENTS_FILE": str(environments)}
    policy_dir = calculator_policy(tmp_path / "calculator-policy")
    app = Embedded(tmp_path / "var", free_port(), tmp_path / "out.txt", env_extra=env)
    try:
        app.wait_for(app.banner, 120, "URL and users printed")
        manage_env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
        manage_env.update(ARBITER_VAR_DIR=str(app.var_dir), **env)
        registered = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "register_policy",
                str(policy_dir),
                "--name",
                "calculator",
                "--environment",
                "calc-stdio",
            ],
            cwd=ROOT,
            env=manage_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert registered.returncode == 0, registered.stderr[-2000:]
        policy_id = int(re.search(r"\(id (\d+)\)", registered.stdout).group(1))
        api = Api(app, token(app, "demo-admin"))
        # The demo's behaviour cloning (run 1) holds the one training worker for minutes: cancel it.
        status, body = api.call("POST", "/api/v1/runs/1/cancel")
        assert status == 202, body

        def run(environment: str) -> dict:
            status, body = api.call(
                "POST",
                "/api/v1/runs/",
                {
                    "kind": "rollout",
                    "config": {"policy_id": policy_id, "environment": environment, "tasks": 6, "samples_per_task": 2},
                },
            )
            assert status == 201, body
            return app.wait_for_value(
                lambda: (
                    (b := api.call("GET", f"/api/v1/runs/{body['id']}")[1])["status"] in ("succeeded", "failed") and b
                ),
                180,
                f"the {environment} rollout",
            )

        played = run("calc-stdio")
        assert played["status"] == "succeeded", played["error"] + played.get("log", "")
        assert played["summary"]["trajectories"] > 0 and played["summary"]["environment"] == "calc-stdio"
        lost = run("calc-dying")
        assert lost["status"] == "failed" and "stopped answering" in lost["error"]
        assert "not the agent's error" in lost["error"] and "trajectories" not in (lost["summary"] or {})
        assert api.errors_5xx == 0
    finally:
        if app.proc.poll() is None:
            app.interrupt()
        app.kill()


def _environment(tmp_path) -> dict:
    from benchmarks.first_run import free_port

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "ARBITER_LAUNCHER")}
    env.update(ARBITER_VAR_DIR=str(tmp_path / "var"), PORT=str(free_port()))
    return env


def _left(key: str, value: int) -> list[str]:
    """Processes whose session (sid) or process group (pgid) is `value`, after up to 15 s."""
    deadline = time.monotonic() + 15
    while True:
        out = subprocess.run(["ps", "-ww", "-e", "-o", f"pid=,{key}=,args="], capture_output=True, text=True).stdout
        left = [line for line in out.splitlines() if int(line.split()[1]) == value]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _wait_for(text, predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s; the output: {text()[-3000:]}"
        time.sleep(0.2)


def test_ctrl_c_in_a_terminal_stops_make_run_with_status_0_and_leaves_nothing(tmp_path):
    """Issue 53: `make run` in a terminal, Ctrl-C: make used to die of the interrupt (status 130,
    "Error 130") whatever the script did. Each set-up step is printed as it happens."""
    import fcntl
    import pty
    import termios
    import threading

    from benchmarks.first_run import ROOT

    master, slave = pty.openpty()

    def terminal():  # the pty becomes the new session's controlling terminal, as a login's is
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    make = subprocess.Popen(
        ["make", "-s", "run"],
        cwd=ROOT,
        env=_environment(tmp_path),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=terminal,
    )
    os.close(slave)
    chunks: list[bytes] = []

    def read():
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    threading.Thread(target=read, daemon=True).start()

    def text() -> str:
        return b"".join(chunks).decode(errors="replace")

    try:
        _wait_for(text, lambda: "Ctrl-C stops" in text(), 240, "banner")
        for line in (
            "database migrations ...",
            "demo users, campaigns",
            "training worker (PID",
            "the web server answers",
        ):
            assert line in text(), line
        assert text().index("database migrations") < text().index("the web server answers") < text().index("Ctrl-C")
        os.write(master, b"\x03")  # Ctrl-C, as typed
        assert make.wait(timeout=60) == 0, text()[-2000:]
        assert "Error 130" not in text() and "Stopping the web server and the workers" in text()
        assert _left("sid", make.pid) == []
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
        for line in _left("sid", make.pid):
            os.kill(int(line.split()[0]), signal.SIGKILL)
        os.close(master)


def test_a_sigint_to_a_backgrounded_launcher_stops_everything_and_restarts_nothing(tmp_path):
    """Issue 53: started in the background (`make run &` from a script: SIGINT ignored on entry),
    a SIGINT to the launcher alone used to be ignored by it while its web server and a worker
    were restarted; now it stops them all and exits 0."""
    from benchmarks.first_run import SCRIPT

    output = tmp_path / "out.txt"
    with output.open("w") as log:
        launcher = subprocess.Popen(
            [str(SCRIPT)],
            cwd=SCRIPT.parent.parent,
            env=_environment(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            process_group=0,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as `&` in a script leaves it
        )
    try:
        _wait_for(output.read_text, lambda: "Ctrl-C stops" in output.read_text(), 240, "banner")
        os.kill(launcher.pid, signal.SIGINT)  # `kill -INT $!`: the launcher, not its group
        assert launcher.wait(timeout=60) == 0, output.read_text()[-2000:]
        assert "restarting it" not in output.read_text()
        assert _left("pgid", launcher.pid) == []
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
