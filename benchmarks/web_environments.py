"""What an environment costs the web process: the labeling screen of a task whose environment
hangs, beside the same screen for a task with no environment (the floor), and a correction's
request, which queues its replay; and, for scale, what starting that hung environment costs a
worker (what each render paid when the web process looked the tools up itself: issue 45).

    .venv/bin/python benchmarks/web_environments.py [--renders 40] [--start-timeout 5]

Runs on its scratch database (benchmarks/_common.py: dropped and re-created). The hung
environment is an MCP server that never answers its handshake (a process that sleeps),
configured as a deployment would. The page is rendered by Django's test client in a process
marked as the web process (arbiter/wsgi.py's mark), the two tasks interleaved render by render.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import add_database_argument, ensure_bench_database

ROOT = Path(__file__).resolve().parent.parent

HUNG_SERVER = [sys.executable, "-c", "import time; time.sleep(3600)"]


def child(renders: int, start_timeout: float) -> dict:
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client

    from annotate.models import Comparison, CorrectionReplay
    from annotate.services.assignments import assignment_next
    from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory
    from training.envs.services import environment_get
    from webapp.process_role import web_process_mark
    from webapp.tokens import api_token_create

    tasks_file = Path(tempfile.mkdtemp(prefix="web-env-")) / "tasks.jsonl"
    tasks_file.write_text(
        json.dumps({"external_id": "t1", "prompt": "2 + 2?", "reference": "4", "split": "train"}) + "\n"
    )
    settings.ARBITER_ENVIRONMENTS = {
        "hung": {
            "class": "mcp",
            "options": {"server": HUNG_SERVER, "tasks": str(tasks_file), "start_timeout": start_timeout},
        }
    }
    settings.ALLOWED_HOSTS = ["*"]
    person = UserFactory(roles=["annotator"])
    screens = {}
    for name, environment in (("no environment (floor)", ""), ("hung environment", "hung")):
        campaign = CampaignFactory(votes_per_comparison=1, name=name)
        task = TaskFactory(environment=environment)
        steps = [{"kind": "action", "tool": "calculate", "arguments": {"expression": "2 + 2"}}]
        steps += [{"kind": "observation", "tool": "calculate", "content": "4"}, {"kind": "answer", "text": "5"}]
        a = TrajectoryFactory(task=task, steps=steps, answer="5")
        b = TrajectoryFactory(task=task)
        Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=b)
        screens[name] = (campaign, assignment_next(campaign=campaign, annotator=person))

    import annotate.services.corrections as corrections

    corrections._replay_enqueue = lambda job_id: None  # no worker here: the job stays queued, not sent
    web_process_mark()  # from here on this process is the web process
    client = Client()
    client.force_login(person)
    times = {name: [] for name in screens}
    for _ in range(renders):  # interleaved: the floor and the environment's task, render by render
        for name, (campaign, _) in screens.items():
            started = time.perf_counter()
            response = client.get(f"/annotate/campaigns/{campaign.pk}/label/")
            times[name].append(time.perf_counter() - started)
            assert response.status_code == 200, response.status_code
    _, key = api_token_create(user=person, name="bench")
    assignment = screens["hung environment"][1]
    started = time.perf_counter()
    response = client.post(
        f"/api/v1/assignments/{assignment.pk}/correction",
        {"side": "left", "kind": "answer", "answer": "4"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {key}",
    )
    correction_ms = 1000 * (time.perf_counter() - started)
    assert response.status_code == 201, response.content
    imported = sorted(m for m in sys.modules if m.startswith(("training.envs.mcp", "mcp")))

    import webapp.process_role as role

    role._web = False  # now a worker: what starting the hung environment costs there
    started = time.perf_counter()
    try:
        environment_get("hung")
        start_error = ""
    except Exception as exc:  # noqa: BLE001 - it cannot start: that is what is measured
        start_error = f"{type(exc).__name__}: {str(exc)[:120]}"
    start_s = time.perf_counter() - started
    return {
        "renders": renders,
        "page_ms_median": {name: round(1000 * statistics.median(t), 1) for name, t in times.items()},
        "page_ms_p90": {name: round(1000 * sorted(t)[int(0.9 * (len(t) - 1))], 1) for name, t in times.items()},
        "correction_request_ms": round(correction_ms, 1),
        "replay_queued": CorrectionReplay.objects.filter(status="queued").count(),
        "environment_modules_in_web_process": imported,
        "worker_start_of_hung_environment_s": round(start_s, 2),
        "worker_start_error": start_error,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=int, default=40, help="renders of each screen, interleaved")
    parser.add_argument("--start-timeout", type=float, default=5.0, help="the hung environment's start_timeout (s)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_database_argument(parser)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.renders, args.start_timeout)))
        return
    env = ensure_bench_database(args.database)
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            "--renders",
            str(args.renders),
            "--start-timeout",
            str(args.start_timeout),
        ],
        cwd=ROOT,
        env={**env, "ARBITER_ENVIRONMENT_MODULES": ""},
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
