"""`make run` for an hour with a long training run, the scheduled sweeps and labeling traffic:
does the embedded app stay up? (issue 27)

    .venv/bin/python benchmarks/soak_embedded.py [--minutes 60] [--annotators 2] [--bc-steps 12000]

Starts scripts/run_embedded.sh on a fresh storage folder (the embedded mode: SQLite and the
filesystem broker) and a free port, as benchmarks/first_run.py does. Once it answers:
- the default policy's behaviour cloning starts by itself (and its rollout run after it); a
  second, long `bc` run (`--bc-steps` optimizer steps) is launched behind it over the API, so
  the training worker is busy for the whole soak and the runs queue up;
- the scheduler sweeps stale jobs every 10 s on the housekeeping worker;
- `--annotators` demo annotators label "Demo: scripted agents" over the API (next, then a
  verdict, 1-5 s apart; when nothing is left for them they keep asking);
- every 2 minutes a small JSONL import goes through the API (a job on the housekeeping
  worker when it is queued).
The traffic starts once both workers beat (`workers_up_s`; the web server answers first).
Every 5 s it checks that the script and the web server are up, and samples the memory of
everything the script started. At the end it stops the script with SIGINT (Ctrl-C) and
prints one JSON line: crashes (process restarts the script reported, or the script gone),
HTTP 5xx answers, labels stored, imports, sweeps run, runs by status, peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from benchmarks.first_run import ROOT, Embedded, answers, free_port

CAMPAIGN = "Demo: scripted agents"


class Api:
    def __init__(self, app: Embedded, token: str):
        self.app, self.token = app, token
        self.errors_5xx = 0

    def call(self, method: str, path: str, body=None) -> tuple[int, object]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Token {self.token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        url = path if path.startswith("http") else self.app.url(path)
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            if exc.code >= 500:
                self.errors_5xx += 1
            return exc.code, exc.read().decode(errors="replace")[:300]

    def rows(self, path: str) -> list:
        """Every row of an API list, following its `next` links (docs/api.md)."""
        rows = []
        while path:
            status, body = self.call("GET", path)
            assert status == 200, body
            rows += body["results"]
            path = body["next"]  # a whole URL, which `call` takes as it is
        return rows


def token(app: Embedded, username: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["ARBITER_VAR_DIR"] = str(app.var_dir)
    out = subprocess.run(
        [sys.executable, "manage.py", "create_api_token", username, "--name", "soak"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.strip()


def group_rss_mb(group: int) -> float:
    out = subprocess.run(["ps", "-e", "-o", "pgid=,rss="], capture_output=True, text=True).stdout
    return sum(int(r) for g, r in (line.split() for line in out.splitlines()) if int(g) == group) / 1024


def label(api: Api, campaign: int, stop: threading.Event, counts: dict, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        status, body = api.call("GET", f"/api/v1/assignments/next?campaign={campaign}")
        if status == 200:
            status, _ = api.call("POST", f"/api/v1/assignments/{body['id']}/judgement", {"choice": rng.randint(1, 5)})
            counts["labels" if status in (200, 201) else "refused"] += 1
        else:
            counts["nothing_left" if status == 204 else "refused"] += 1
        stop.wait(rng.uniform(1, 5))


def import_batch(api: Api, index: int) -> int:
    """20 trajectories (2 agents x 10 tasks) in the native format, through the JSON API."""
    body = [
        {
            "schema": "arbiter.trajectory/v1",
            "task": {"external_id": f"soak-{index}-{i % 10}", "prompt": f"Question {i % 10} of batch {index}?"},
            "agent": {"name": f"soak-agent-{i // 10}", "version": "1"},
            "steps": [{"kind": "thought", "text": f"Thinking about {i}."}, {"kind": "answer", "text": f"answer {i}"}],
        }
        for i in range(20)
    ]
    status, _ = api.call("POST", "/api/v1/trajectories/", body)
    return status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--annotators", type=int, default=2)
    parser.add_argument("--bc-steps", type=int, default=12000, help="the long run's optimizer steps")
    parser.add_argument("--keep", action="store_true", help="keep the storage folder (printed)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="arbiter-soak-"))
    app = Embedded(scratch / "var", free_port(), scratch / "make-run.out")
    figures: dict = {"minutes": args.minutes, "annotators": args.annotators}
    stop = threading.Event()
    try:
        figures["up_s"] = app.wait_for(app.banner, 300, "URL and users printed")
        admin = Api(app, token(app, "demo-admin"))

        def both_workers_beat() -> bool:
            status, body = admin.call("GET", "/api/v1/workers/")
            return status == 200 and all(q["alive"] >= 1 for q in body["queues"].values())

        # The traffic starts once both workers beat: the web server answers first, and on a slow
        # machine the training worker (it imports torch) may take a minute more to come up.
        figures["workers_up_s"] = app.wait_for(both_workers_beat, 300, "both workers beating")
        annotators = [
            Api(app, token(app, f"demo-annotator{'' if i == 0 else i + 1}")) for i in range(min(args.annotators, 2))
        ]
        campaigns = admin.rows("/api/v1/campaigns/")
        campaign = next(c["id"] for c in campaigns if c["name"] == CAMPAIGN)
        status, long_run = admin.call(
            "POST",
            "/api/v1/runs/",
            {"kind": "bc", "name": "soak: long behaviour cloning", "config": {"max_steps": args.bc_steps}},
        )
        assert status == 201, long_run
        counts = {"labels": 0, "refused": 0, "nothing_left": 0}
        threads = [
            threading.Thread(target=label, args=(api, campaign, stop, counts, i), daemon=True)
            for i, api in enumerate(annotators)
        ]
        for t in threads:
            t.start()
        deadline = time.monotonic() + args.minutes * 60
        next_import, imports, peak, health_failures, index = time.monotonic(), [], 0.0, 0, 0
        while time.monotonic() < deadline:
            if app.proc.poll() is not None:
                figures["script_exited"] = app.proc.returncode
                break
            if not answers(app.url("/health")):
                health_failures += 1
            peak = max(peak, group_rss_mb(app.proc.pid))
            if time.monotonic() >= next_import:
                imports.append(import_batch(admin, index))
                index += 1
                next_import += 120
            time.sleep(5)
        stop.set()
        for t in threads:
            t.join(timeout=40)
        output = app.output.read_text()
        runs = admin.rows("/api/v1/runs/")
        status, workers = admin.call("GET", "/api/v1/workers/")
        _, long_detail = admin.call("GET", f"/api/v1/runs/{long_run['id']}?metrics=0")
        housekeeping = (app.var_dir / "worker-housekeeping.log").read_text(errors="replace")
        figures.update(
            {
                "crashes": len(re.findall(r"make run: the \w+ process stopped", output)) + ("script_exited" in figures),
                "health_failures": health_failures,
                "http_5xx": sum(a.errors_5xx for a in [admin, *annotators]),
                **counts,
                "imports": {str(s): imports.count(s) for s in sorted(set(imports))},
                "sweeps": len(re.findall(r"Task webapp.sweep_stale_jobs\[[^\]]+\] succeeded", housekeeping)),
                "sweeps_expired": len(
                    re.findall(r"Discarding revoked task: webapp.sweep_stale_jobs|expired", housekeeping)
                ),
                "runs": {f"{r['kind']}#{r['id']}": f"{r['status']} {r['progress']:.0%}" for r in runs},
                "long_run_progress": long_detail["progress"] if isinstance(long_detail, dict) else None,
                "workers_alive": {q: s["alive"] for q, s in workers["queues"].items()},
                "peak_rss_mb": round(peak),
                "unrecoverable_in_logs": sum(
                    p.read_text(errors="replace").count("Unrecoverable error") for p in app.var_dir.glob("worker-*.log")
                ),
            }
        )
    finally:
        stop.set()
        if app.proc.poll() is None:
            try:
                figures["stop_s"] = app.interrupt()
            except subprocess.TimeoutExpired:
                figures["stop_s"] = "over 60 s: killed"
        app.kill()
        if not args.keep:
            subprocess.run(["rm", "-rf", str(scratch)])
        else:
            figures["folder"] = str(scratch)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
