"""Next-assignment + submit cycle under 32 concurrent simulated annotators, against gunicorn
and PostgreSQL on 127.0.0.1, beside the same server's throughput on a trivial view.

    .venv/bin/python benchmarks/labeling_cycle.py [--annotators 32] [--seconds 15] [--rounds 3] [--port N]

One gunicorn (gthread) on 127.0.0.1 (`--port`, else $ARBITER_BENCH_PORT, else a free port)
serves the scratch database (`--database`, dropped and re-created at start). Each round runs, with
the same client (4 processes x 8 threads, keep-alive HTTP/1.1):
  1. trivial: every client loops GET /health (no database, no session);
  1b. authenticated no-op: GET /api/v1/whoami (token and role lookup only), the floor
     of any API call;
  2. cycle, saturated: every annotator loops GET /api/v1/assignments/next then POST
     /api/v1/assignments/{id}/judgement, with no pause: the server's capacity;
  3. cycle, paced: every annotator pauses a random 0-2 s between cycles (a labeler who
     reads for a second, ~10x faster than people are): the latency a labeler sees;
  4. one annotator alone, no pause: the cycle's latency on an idle server.
Reports medians over rounds: requests or cycles per second, p50 and p95 latency, and
the ratio of cycle throughput to trivial throughput measured in the same round.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _common import add_database_argument, add_port_argument, ensure_bench_database, free_port  # noqa: E402

PROCESSES = 4


def setup_campaign(n_comparisons: int, n_annotators: int) -> None:
    """Runs in a child with Django: a fresh campaign, its comparisons, annotators and tokens."""
    import django

    django.setup()
    from django.db import connection

    from annotate.models import Campaign, Comparison, Policy, Task, Trajectory
    from webapp.models import User
    from webapp.roles import Role, user_role_set
    from webapp.tokens import api_token_create

    with connection.cursor() as cur:
        cur.execute(
            "TRUNCATE annotate_judgement, annotate_assignment, annotate_comparison, annotate_trajectory, "
            "annotate_task, annotate_policy, annotate_campaign, webapp_apitoken CASCADE"
        )
    policy = Policy.objects.create(name="bench")
    tasks = Task.objects.bulk_create(Task(external_id=f"b{i}", prompt=f"Question {i}?") for i in range(n_comparisons))
    steps = lambda i, s: [
        {"kind": "action", "tool": "search", "arguments": {"query": f"q{i}"}},  # noqa: E731
        {"kind": "observation", "tool": "search", "content": "result " * 40},
        {"kind": "answer", "text": f"answer {s}"},
    ]
    trajectories = Trajectory.objects.bulk_create(
        Trajectory(task=t, policy=policy, steps=steps(i, s), answer=f"answer {s}", content_hash=f"{i}-{s}", num_steps=3)
        for i, t in enumerate(tasks)
        for s in range(2)
    )
    campaign = Campaign.objects.create(name="bench", votes_per_comparison=3, lease_seconds=600)
    Comparison.objects.bulk_create(
        Comparison(
            campaign=campaign, task=tasks[i], trajectory_a=trajectories[2 * i], trajectory_b=trajectories[2 * i + 1]
        )
        for i in range(n_comparisons)
    )
    tokens = []
    for i in range(n_annotators):
        user, _ = User.objects.get_or_create(username=f"bench-annotator-{i}")
        user_role_set(user=user, roles=[Role.ANNOTATOR])
        tokens.append(api_token_create(user=user, name="bench")[1])
    with connection.cursor() as cur:  # fresh statistics: the first round plans like the others
        cur.execute("ANALYZE")
    print(json.dumps({"campaign": campaign.id, "tokens": tokens}))


class Client:
    def __init__(self, port: int):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def request(self, method, path, body=None, headers=None):
        headers = dict(headers or {})
        if body is not None:
            body = json.dumps(body)
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                data = response.read()
                return response.status, data
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                if attempt == 2:
                    raise


def worker(mode, port, tokens, campaign, deadline, warmup_until, pace, out_queue):
    """One process: len(tokens) threads, each an annotator; sends its timings back."""
    import threading

    latencies, errors, done = [], [0], [0]
    lock = threading.Lock()

    def run(token):
        client, headers = Client(port), {"Authorization": f"Token {token}"}
        rng = random.Random(token)
        while (now := time.perf_counter()) < deadline:
            start = now
            if mode == "trivial":
                status, _ = client.request("GET", "/health")
                ok = status == 200
            elif mode == "auth":
                status, _ = client.request("GET", "/api/v1/whoami", headers=headers)
                ok = status == 200
            else:
                status, data = client.request("GET", f"/api/v1/assignments/next?campaign={campaign}", headers=headers)
                ok = status == 200
                if ok:
                    assignment = json.loads(data)["id"]
                    status, _ = client.request(
                        "POST",
                        f"/api/v1/assignments/{assignment}/judgement",
                        body={"choice": rng.randint(1, 5)},
                        headers=headers,
                    )
                    ok = status == 201
            elapsed = time.perf_counter() - start
            if start >= warmup_until:
                with lock:
                    if ok:
                        latencies.append(elapsed)
                        done[0] += 1
                    else:
                        errors[0] += 1
            if pace:
                time.sleep(rng.uniform(0, 2 * pace))

    threads = [threading.Thread(target=run, args=(t,)) for t in tokens]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out_queue.put((latencies, errors[0], done[0]))


def phase(mode, port, tokens, campaign, seconds, warmup=2.0, pace=0.0):
    start = time.perf_counter()
    warmup_until, deadline = start + warmup, start + warmup + seconds
    queue = mp.Queue()
    chunks = [tokens[i::PROCESSES] for i in range(PROCESSES)]
    procs = [
        mp.Process(target=worker, args=(mode, port, c, campaign, deadline, warmup_until, pace, queue)) for c in chunks
    ]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    latencies = sorted(x for r in results for x in r[0])
    errors = sum(r[1] for r in results)
    count = sum(r[2] for r in results)
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    return {"per_s": count / seconds, "p50_ms": 1000 * q[49], "p95_ms": 1000 * q[94], "errors": errors, "n": count}


def serve(env: dict, port: int, args) -> subprocess.Popen:
    """gunicorn on 127.0.0.1:port in a session of its own, once /health answers."""
    server_env = {**env, **dict(kv.split("=", 1) for kv in args.server_env)}
    server = subprocess.Popen(
        [
            str(ROOT / ".venv/bin/gunicorn"),
            "webapp.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "-k",
            args.worker_class,
            "--workers",
            str(args.workers),
            "--threads",
            str(args.threads),
            "--log-level",
            "warning",
            "--keep-alive",
            "30",
        ],
        cwd=ROOT,
        env=server_env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if Client(port).request("GET", "/health")[0] == 200:
                return server
        except OSError:
            time.sleep(0.2)
    stop(server)
    raise SystemExit(
        f"gunicorn on 127.0.0.1:{port} did not answer /health within 60 s "
        f"(exit status {server.returncode}; is the port taken?)"
    )


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=30)


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers (default: 4)")
    parser.add_argument("--threads", type=int, default=2, help="threads per gunicorn worker (default: 2)")
    parser.add_argument("--worker-class", default="gthread", help="gunicorn's worker class (gthread or sync)")
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an environment variable for the server, e.g. DB_POOL=true (repeatable)",
    )
    add_port_argument(parser, "gunicorn")
    add_database_argument(parser)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=15, help="measured seconds per scenario (default: 15)")
    parser.add_argument("--warmup", type=float, default=2, help="unmeasured seconds before each (default: 2)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--comparisons",
        type=int,
        default=20_000,
        help="comparisons in the campaign; enough that no annotator runs out (default: 20000)",
    )
    add_server_arguments(parser)
    parser.add_argument("--setup-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup_child:
        setup_campaign(args.comparisons, args.annotators)
        return

    env = ensure_bench_database(args.database)
    port = args.port or free_port()
    server = serve(env, port, args)
    try:
        rows = {"trivial": [], "auth": [], "cycle": [], "paced": [], "single": []}
        for r in range(args.rounds):
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--setup-child",
                    "--annotators",
                    str(args.annotators),
                    "--comparisons",
                    str(args.comparisons),
                ],
                cwd=ROOT,
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            setup = json.loads(out.stdout.strip().splitlines()[-1])
            tokens, campaign, timing = setup["tokens"], setup["campaign"], (args.seconds, args.warmup)
            rows["trivial"].append(phase("trivial", port, tokens, campaign, *timing))
            rows["auth"].append(phase("auth", port, tokens, campaign, *timing))
            rows["cycle"].append(phase("cycle", port, tokens, campaign, *timing))
            rows["paced"].append(phase("cycle", port, tokens, campaign, *timing, pace=1.0))
            rows["single"].append(phase("cycle", port, tokens[:1], campaign, *timing))
            print(f"round {r + 1}: " + json.dumps({k: v[-1] for k, v in rows.items()}), flush=True)
    finally:
        stop(server)

    def med(kind, key):
        return statistics.median(x[key] for x in rows[kind])

    ratios = [c["per_s"] / t["per_s"] for c, t in zip(rows["cycle"], rows["trivial"])]
    print()
    print(
        f"{args.annotators} concurrent clients, gunicorn {args.worker_class} {args.workers}x{args.threads} "
        f"{' '.join(args.server_env)}, "
        f"{args.rounds} rounds of {args.seconds:g} s, medians:"
    )
    print("| scenario | per second | p50 ms | p95 ms | errors |")
    print("|---|---|---|---|---|")
    for kind, label in (
        ("trivial", "trivial view GET /health (requests)"),
        ("auth", "token-authenticated GET /api/v1/whoami (requests)"),
        ("cycle", "next + submit, no pause (cycles)"),
        ("paced", "next + submit, 0-2 s pause (cycles)"),
        ("single", "next + submit, one annotator alone (cycles)"),
    ):
        print(
            f"| {label} | {med(kind, 'per_s'):.0f} | {med(kind, 'p50_ms'):.1f} | {med(kind, 'p95_ms'):.1f} | "
            f"{sum(x['errors'] for x in rows[kind])} |"
        )
    print(
        f"\ncycle throughput / trivial throughput, per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
        f"median {statistics.median(ratios):.2f}"
    )


if __name__ == "__main__":
    main()
