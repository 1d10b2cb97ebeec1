"""Latency of the pages an admin opens, measured from outside: GET over HTTP from this process
to a real gunicorn on 127.0.0.1, as an admin (a session cookie), idle and under CPU load.

    .venv/bin/python benchmarks/admin_pages.py --comparisons 300 --annotators 5 --repeats 5 --load 12

The scratch database (`--database`, dropped and re-created at start) is filled by a child
process through the app's own services, as the app fills it: scripted agents' trajectories
paired into a campaign (`scripted_trajectories_generate`), voted on by simulated annotators
(`campaign_simulate_labels`); a chat judge run over that campaign against a scripted
OpenAI-compatible server (tests/fake_openai.py), so the judge has a run of verdicts and an
audit log of calls and the quality page its judge panel; an evaluation of a tiny policy against
two wider ones played through `evaluation_execute` (its episodes stored); and a dataset snapshot
of the campaign (`snapshot_create`, built in that process as the worker builds it).

Pages timed (medians over `--repeats` GETs each, interleaved, after one untimed GET that warms
the gunicorn worker): the campaign's quality page, the judge's page, the evaluation's page, and
the trl Parquet download of the snapshot. The download is timed twice: `download (new
snapshot)`, the first GET after a new snapshot of the campaign was built (a fresh snapshot
each repeat, built by a child process as the worker builds it, the jobs that build queues run
there at once, as a worker would run them: whatever the worker prepares when a snapshot is
built is ready, what it does not the request builds), and `download (again)`, a later GET of
the same snapshot. `floor: GET /health` is the same server's cheapest answer, the floor under
load.

`--load N` repeats every timing with N CPU hogs running (`stress-ng --cpu 1`, each in a session
of its own: see `with_load`), beside the idle figures. Goal (issue 56): < 300 ms idle, < 1 s loaded.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._common import (
    ROOT,
    add_database_argument,
    ensure_bench_database,
    free_port,
    gunicorn_start,
    gunicorn_stop,
    markdown_table,
)

GOAL_IDLE_MS = 300
GOAL_LOADED_MS = 1000


def build_child(comparisons: int, annotators: int, eval_tasks: int) -> None:
    """Fill the scratch database through the services; prints JSON with the ids and the admin's cookie."""
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client

    from annotate.models import Campaign
    from annotate.services.campaigns import campaign_get_or_create
    from training.simulated_annotators import AnnotatorProfile
    from training.simulation import campaign_simulate_labels, scripted_trajectories_generate
    from webapp.models import User
    from webapp.roles import Role, user_role_set

    admin = User.objects.create_user(username="bench-admin", password=None)
    user_role_set(user=admin, roles=[Role.ADMIN])
    campaign, _ = campaign_get_or_create(name="bench: admin pages", created_by=admin)
    Campaign.objects.filter(pk=campaign.pk).update(votes_per_comparison=3)
    campaign.refresh_from_db()
    # Two scripted agents, one sample each: one comparison per task.
    report = scripted_trajectories_generate(campaign=campaign, n_tasks=comparisons, samples_per_agent=1, seed=7)
    votes = campaign_simulate_labels(
        campaign=campaign, annotators=annotators, profile=AnnotatorProfile(temperature=1.0, flip=0.1), seed=7
    )
    judge_id, judge_runs = _judge_with_runs(admin, campaign)
    evaluation_id, episodes = _evaluation(Path(settings.VAR_DIR) / "policies", eval_tasks)
    client = Client()
    client.force_login(admin)
    print(
        json.dumps(
            {
                "campaign": campaign.pk,
                "comparisons": report.comparisons,
                "judgements": votes,
                "judge": judge_id,
                "judge_votes": judge_runs,
                "evaluation": evaluation_id,
                "episodes": episodes,
                "cookie": f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}",
            }
        )
    )


def _judge_with_runs(admin, campaign) -> tuple[int, int]:
    """A chat judge run over the whole campaign against a scripted server: (judge id, votes stored)."""
    from django.conf import settings

    from annotate.models import Judge, JudgeVote
    from tests.fake_openai import ok, start_fake_openai
    from webapp.runs.services import run_execute, run_launch

    verdict = {
        "rationale": "A answers from the page it opened.",
        "verdict": "A better",
        "both_bad": False,
        "ratings": {},
        "first_wrong_step_a": None,
        "first_wrong_step_b": 0,
    }
    settings.JUDGE_ALLOW_PRIVATE_ADDRESSES = True  # the scripted server is on 127.0.0.1
    fake, stop = start_fake_openai()
    fake.default = ok(verdict, usage={"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100})
    try:
        judge = Judge.objects.create(
            name="bench-chat-judge",
            kind=Judge.Kind.CHAT,
            config={"base_url": fake.url, "model": "judge-1", "requests_per_minute": 0, "backoff_s": 0.01},
        )
        config = {"judge_id": judge.pk, "campaign_id": campaign.pk, "swapped_share": 0.1, "repeat_share": 0.1}
        run = run_launch(kind="judge", config=config, user=admin, enqueue=False)
        run_execute(run_id=run.pk, attempt=run.attempt)
    finally:
        stop()
    return judge.pk, JudgeVote.objects.filter(judge=judge).count()


def _evaluation(policies: Path, eval_tasks: int) -> tuple[int, int]:
    """A tiny policy against two wider ones, four samples a task and greedy, played and stored:
    (id, episodes)."""
    from annotate.models import Policy
    from tests.policy_fixtures import tiny_policy_dir
    from training.evaluation.services import evaluation_execute
    from training.models import EvaluationEpisode

    start, *others = (
        Policy.objects.create(
            name=f"tiny-{hidden}",
            version="1",
            model_dir=str(tiny_policy_dir(policies / f"bench-tiny-{hidden}", hidden=hidden)),
        )
        for hidden in (32, 40, 48)
    )
    evaluation = evaluation_execute(
        name="bench before/after",
        baseline=start,
        others=[(policy.name, policy) for policy in others],
        n_tasks=eval_tasks,
        samples=4,
    )
    return evaluation.pk, EvaluationEpisode.objects.filter(entry__evaluation=evaluation).count()


def snapshot_child(campaign_id: int) -> None:
    """A new snapshot of the campaign, built here as the worker builds it, with the jobs its build
    queues (run here too when CELERY_TASK_ALWAYS_EAGER is set); prints its id."""
    import django

    django.setup()
    from django.conf import settings

    from annotate.models import Campaign, DatasetSnapshot
    from annotate.services.datasets import SnapshotFilters, snapshot_create

    settings.SNAPSHOT_INLINE_MAX_JUDGEMENTS = 10**9  # built in this process, standing in for the worker
    campaign = Campaign.objects.get(pk=campaign_id)
    n = DatasetSnapshot.objects.count()
    snapshot = snapshot_create(
        name=f"bench snapshot {n + 1}", campaigns=[campaign], filters=SnapshotFilters(include_synthetic=True)
    )
    print(json.dumps({"snapshot": snapshot.pk, "status": snapshot.status}))


def _child(env: dict, *args: str) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{args[0]} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def get(port: int, path: str, cookie: str) -> tuple[float, int, int]:
    """(seconds to the last byte, status, body bytes) of one GET."""
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("GET", path, headers={"Cookie": cookie})
    response = connection.getresponse()
    body = response.read()
    seconds = time.perf_counter() - start
    connection.close()
    return seconds, response.status, len(body)


def time_pages(env: dict, port: int, built: dict, repeats: int) -> dict[str, list[float]]:
    """Each page `repeats` times, interleaved; {page: [seconds]}. A page that does not answer 200 stops the run."""
    pages = _pages(built)
    download = "/annotate/datasets/{}/download?format=trl&filetype=parquet"
    downloads = ["download (new snapshot)", "download (again)"]
    times: dict[str, list[float]] = {name: [] for name in ["floor: GET /health", *pages, *downloads]}
    for path in pages.values():  # warm the worker: imports, template loading
        _check(path, *get(port, path, built["cookie"])[1:])
    for _ in range(repeats):
        for name, path in {"floor: GET /health": "/health", **pages}.items():
            seconds, status, size = get(port, path, built["cookie"])
            _check(path, status, size)
            times[name].append(seconds)
        # CELERY_TASK_ALWAYS_EAGER: the jobs the build queues run here, at once, as the worker's would.
        snapshot = _child({**env, "CELERY_TASK_ALWAYS_EAGER": "true"}, "--snapshot-child", str(built["campaign"]))
        assert snapshot["status"] == "succeeded", snapshot
        for name in downloads:
            seconds, status, size = get(port, download.format(snapshot["snapshot"]), built["cookie"])
            _check(download, status, size)
            times[name].append(seconds)
    return times


def profile_child(built_json: str, out: str) -> None:
    """cProfile of one GET of each page through Django's test client in this process (after one
    untimed GET), written to `out`/admin_pages-<page>.txt: the page's SQL query count, the top
    functions by own time, and the project's functions by cumulative time."""
    import cProfile
    import io
    import pstats

    import django

    django.setup()
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from webapp.models import User

    built = json.loads(built_json)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(User.objects.get(username="bench-admin"))
    Path(out).mkdir(parents=True, exist_ok=True)
    for name, path in _pages(built).items():
        client.get(path)
        profiler = cProfile.Profile()
        with CaptureQueriesContext(connection) as queries:
            profiler.enable()
            response = client.get(path)
            profiler.disable()
        _check(path, response.status_code, len(response.content))
        text = io.StringIO()
        text.write(f"GET {path}: {len(queries)} SQL queries\n")
        pstats.Stats(profiler, stream=text).strip_dirs().sort_stats("tottime").print_stats(20)
        # By cumulative time, the project's own functions only (not the middleware around them).
        project = pstats.Stats(profiler, stream=io.StringIO()).sort_stats("cumulative")
        project.stream = text
        project.print_stats(rf"^{ROOT}/(?!\.venv)", 25)
        (Path(out) / f"admin_pages-{name.split()[0]}.txt").write_text(text.getvalue())
        print(f"{name}: {len(queries)} queries, profile in {out}", file=sys.stderr)
    print(json.dumps({"profiled": len(_pages(built))}))


def _pages(built: dict) -> dict[str, str]:
    return {
        "quality page": f"/annotate/campaigns/{built['campaign']}/quality/",
        "judge page": f"/training/judges/{built['judge']}/",
        "evaluation page": f"/training/evaluations/{built['evaluation']}/",
    }


def _check(path: str, status: int, size: int) -> None:
    if status != 200 or size == 0:
        raise SystemExit(f"GET {path} answered {status} with {size} bytes")


def with_load(cpus: int, measure):
    """`measure()` with `cpus` CPU hogs running (none when 0), each `stress-ng --cpu 1` in a session
    of its own, stopped by their PIDs after. A session each: the kernel's autogroup scheduling
    shares the CPU equally between sessions, so N hogs in one session would take only that one
    session's share, not the load of N jobs."""
    if cpus == 0:
        return measure()
    hogs = [
        subprocess.Popen(["stress-ng", "--cpu", "1", "--quiet"], start_new_session=True, stderr=subprocess.DEVNULL)
        for _ in range(cpus)
    ]
    try:
        time.sleep(2)  # the load is on before the first request
        return measure()
    finally:
        for hog in hogs:
            os.killpg(hog.pid, signal.SIGTERM)
        for hog in hogs:
            hog.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comparisons", type=int, default=300, help="comparisons in the campaign (default: 300)")
    parser.add_argument("--annotators", type=int, default=5, help="simulated annotators voting (default: 5)")
    parser.add_argument("--eval-tasks", type=int, default=20, help="tasks the evaluation plays (default: 20)")
    parser.add_argument("--repeats", type=int, default=5, help="timed GETs per page and load; medians (default: 5)")
    parser.add_argument(
        "--load",
        type=int,
        default=0,
        help="also time with N CPU hogs, `stress-ng --cpu 1` each (default: 0, idle only)",
    )
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (default: 2, as run_embedded.sh)")
    parser.add_argument("--threads", type=int, default=4, help="gunicorn threads per worker (default: 4)")
    add_database_argument(parser)
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="also write a cProfile of each page (test client, in process) to DIR/admin_pages-<page>.txt",
    )
    parser.add_argument("--profile-child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--build-child", nargs=3, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--snapshot-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arbiter.settings")
    if args.build_child:
        return build_child(*args.build_child)
    if args.snapshot_child:
        return snapshot_child(args.snapshot_child)
    if args.profile_child:
        return profile_child(*args.profile_child)

    env = ensure_bench_database(args.database)
    # Bundles are kept by snapshot id and content hash: the last run's would serve this run's snapshots.
    shutil.rmtree(Path(env["ARBITER_VAR_DIR"]) / "exports", ignore_errors=True)
    start = time.perf_counter()
    built = _child(env, "--build-child", str(args.comparisons), str(args.annotators), str(args.eval_tasks))
    print(json.dumps({k: v for k, v in built.items() if k != "cookie"}))
    print(f"built in {time.perf_counter() - start:.0f} s", flush=True)
    if args.profile:
        _child(env, "--profile-child", json.dumps(built), args.profile)
    port = free_port()
    server = gunicorn_start(env, port, workers=args.workers, threads=args.threads)
    try:
        loads = [0] + ([args.load] if args.load else [])
        results = {cpus: with_load(cpus, lambda: time_pages(env, port, built, args.repeats)) for cpus in loads}
    finally:
        gunicorn_stop(server)
    header = ["page", "idle ms (median)", "idle ms (max)"]
    if args.load:
        header += [f"{args.load} hogs ms (median)", f"{args.load} hogs ms (max)"]
    rows = []
    for name in results[0]:
        row = [name]
        for cpus in loads:
            row += [f"{1000 * statistics.median(results[cpus][name]):.0f}", f"{1000 * max(results[cpus][name]):.0f}"]
        rows.append(row)
    print(f"\nGoal: < {GOAL_IDLE_MS} ms idle, < {GOAL_LOADED_MS} ms loaded (issue 56)\n")
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
