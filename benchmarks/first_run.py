"""How long a newcomer waits for `make run` once the packages are installed (`make setup`):
scripts/run_embedded.sh on a fresh storage folder, until /health and the login page answer.

    .venv/bin/python benchmarks/first_run.py [--repeats 3] [--load 2] [--restart] [--until-policy]

Each repeat starts the script in the embedded mode (DATABASE_URL and CELERY_BROKER_URL are
removed from its environment) with a fresh ARBITER_VAR_DIR in a temporary folder and a free
port on 127.0.0.1, in a process group of its own (in this session), and records:
- `web_s`: seconds until GET /health answers 200, and `login_s`: until GET /login/ does;
- `banner_s`: until the script has printed the URL and the demo users (it does so last);
- with --until-policy, `bc_s` and `rollouts_s`: until the default policy's behaviour-cloning
  run and the rollout run it queues into "Demo: encyclopedia QA" have succeeded (read from the
  SQLite file, read-only), and the comparisons that campaign then holds;
- `stop_s`: from SIGINT to the whole process group (Ctrl-C in a terminal) until it is gone;
- with --restart, `restart_s`: a second start on the same folder, until /health answers.

--load N runs `stress-ng --cpu N` in the background for the whole measurement (a busy
machine), stopped by its PID. It shares the script's session, so the kernel's per-session
CPU shares (autogroup) do not shield the script from it. Everything started here is
stopped by PID at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from core.ids import ascii_digits

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "run_embedded.sh"
DEMO_CAMPAIGN = "Demo: encyclopedia QA"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


class Embedded:
    """scripts/run_embedded.sh on one storage folder and port, in its own process group."""

    def __init__(self, var_dir: Path, port: int, output: Path, env_extra: dict | None = None):
        self.var_dir, self.port, self.output = var_dir, port, output
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
        env.update(ARBITER_VAR_DIR=str(var_dir), PORT=str(port), **(env_extra or {}))
        self.log = output.open("w")
        self.started = time.monotonic()
        # SIGINT back to its default in the script: started from a background job (nohup ... &)
        # it would inherit SIGINT ignored, and a shell cannot trap a signal ignored on entry.
        self.proc = subprocess.Popen(
            [str(SCRIPT)],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            process_group=0,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )

    def seconds(self) -> float:
        return round(time.monotonic() - self.started, 1)

    def wait_for(self, predicate, timeout: float, what: str) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return self.seconds()
            if self.proc.poll() is not None:
                raise RuntimeError(f"run_embedded.sh exited ({self.proc.returncode}) before {what}; see {self.output}")
            time.sleep(0.1)
        raise RuntimeError(f"no {what} within {timeout:.0f} s; see {self.output}")

    def wait_for_value(self, compute, timeout: float, what: str):
        """Like wait_for, returning the first truthy value `compute()` gave."""
        found = []
        self.wait_for(lambda: found.append(compute()) or found[-1], timeout, what)
        return found[-1]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def banner(self) -> bool:
        return "Ctrl-C stops" in self.output.read_text()

    def run_status(self, kind: str) -> str:
        """The status of the newest run of `kind` ("" when there is none yet)."""
        try:
            with sqlite3.connect(f"file:{self.var_dir / 'arbiter.sqlite3'}?mode=ro", uri=True, timeout=5) as db:
                row = db.execute(
                    "SELECT status FROM webapp_run WHERE kind = ? ORDER BY id DESC LIMIT 1", (kind,)
                ).fetchone()
        except sqlite3.Error:
            return ""
        return row[0] if row else ""

    def comparisons(self) -> int:
        with sqlite3.connect(f"file:{self.var_dir / 'arbiter.sqlite3'}?mode=ro", uri=True, timeout=5) as db:
            return db.execute(
                "SELECT count(*) FROM annotate_comparison c JOIN annotate_campaign k "
                "ON k.id = c.campaign_id WHERE k.name = ?",
                (DEMO_CAMPAIGN,),
            ).fetchone()[0]

    def interrupt(self) -> float:
        """SIGINT to the process group, as Ctrl-C in a terminal; seconds until the script is gone."""
        start = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGINT)
        self.proc.wait(timeout=60)
        return round(time.monotonic() - start, 1)

    def kill(self) -> None:
        """Whatever is left of the group (nothing, when the script stopped its children)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.log.close()


def until_succeeded(app: Embedded, kind: str, timeout: float) -> float:
    def done() -> bool:
        status = app.run_status(kind)
        if status in ("failed", "cancelled"):
            raise RuntimeError(f"the {kind} run {status}; see {app.var_dir / 'worker-training.log'}")
        return status == "succeeded"

    return app.wait_for(done, timeout, f"{kind} run that succeeded")


def measure(args, scratch: Path, index: int) -> dict:
    var_dir = scratch / f"var-{index}"
    port = free_port()
    app = Embedded(var_dir, port, scratch / f"run-{index}.out")
    figures: dict = {"repeat": index + 1, "port": port, "loadavg_1m_before": round(os.getloadavg()[0], 2)}
    try:
        figures["web_s"] = app.wait_for(lambda: answers(app.url("/health")), args.timeout, "answer on /health")
        figures["login_s"] = app.wait_for(lambda: answers(app.url("/login/")), args.timeout, "login page")
        figures["banner_s"] = app.wait_for(app.banner, args.timeout, "URL and users printed")
        if args.until_policy:
            figures["bc_s"] = until_succeeded(app, "bc", args.policy_timeout)
            figures["rollouts_s"] = until_succeeded(app, "rollout", args.policy_timeout)
            figures["demo_comparisons"] = app.comparisons()
        figures["stop_s"] = app.interrupt()
        figures["leftover_processes"] = leftovers(var_dir)
        if args.restart:
            again = Embedded(var_dir, port, scratch / f"restart-{index}.out")
            try:
                figures["restart_s"] = again.wait_for(
                    lambda: answers(again.url("/health")), args.timeout, "answer on /health after a restart"
                )
                figures["restart_stop_s"] = again.interrupt()
            finally:
                again.kill()
    finally:
        app.kill()
    return figures


def leftovers(var_dir: Path) -> list[str]:
    """Processes still alive (zombies aside) with this storage folder in their environment or arguments."""
    found = []
    for proc in Path("/proc").iterdir():
        if not ascii_digits(proc.name):
            continue
        try:
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (proc / "cmdline").read_bytes()
            if state != "Z" and str(var_dir).encode() in (proc / "environ").read_bytes() + cmdline:
                command = cmdline.replace(b"\0", b" ").decode(errors="replace")[:100]
                found.append(f"{proc.name} {command}")
        except OSError:
            continue
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--load", type=int, default=0, help="stress-ng --cpu N in the background (0: none)")
    parser.add_argument("--restart", action="store_true", help="also time a second start on the same folder")
    parser.add_argument(
        "--until-policy",
        action="store_true",
        help="also wait for the default policy's run and its demo rollouts to succeed",
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed for the app to answer")
    parser.add_argument("--policy-timeout", type=float, default=3600, help="seconds allowed for each run")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folders (logs, databases)")
    args = parser.parse_args()

    stress = None
    if args.load:
        if shutil.which("stress-ng") is None:
            parser.error("--load needs stress-ng (apt-get install -y stress-ng)")
        stress = subprocess.Popen(
            ["stress-ng", "--cpu", str(args.load), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(2)
    scratch = Path(tempfile.mkdtemp(prefix="arbiter-first-run-"))
    results = []
    try:
        for index in range(args.repeats):
            figures = measure(args, scratch, index)
            figures["load"] = args.load
            results.append(figures)
            print(json.dumps(figures), flush=True)
    finally:
        if stress is not None:
            stress.terminate()
            stress.wait()
        if args.keep:
            print(f"scratch folders kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    keys = [k for k in ("web_s", "login_s", "banner_s", "bc_s", "rollouts_s", "stop_s", "restart_s") if k in results[0]]
    print(
        f"medians over {len(results)} repeat(s), stress-ng --cpu {args.load}: "
        + ", ".join(f"{k} {statistics.median(r[k] for r in results):.1f}" for k in keys)
    )


if __name__ == "__main__":
    main()
