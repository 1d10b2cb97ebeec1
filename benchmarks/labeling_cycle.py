"""Next-assignment + submit cycle under 32 concurrent simulated annotators, against gunicorn
and PostgreSQL on 127.0.0.1, beside the same server's throughput on a trivial view and a
raw-SQL floor: the cycle's own statements from a plain psycopg loop.

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
  4. one annotator alone, no pause: the cycle's latency on an idle server;
  5. floor: the same number of annotators, taking turns on as many psycopg connections
     as gunicorn has threads (workers x threads: the same concurrency at PostgreSQL), in 4
     processes (autocommit, parameters apart from the SQL and statements prepared after 5
     runs, as the app's settings have Django's backend send them), issuing
     the statements the server issues for a cycle (annotate/services/labeling_sql.py: the
     same strings) with no HTTP, no Django, no JSON: what the cycle costs at the least.
Reports medians over rounds: requests or cycles per second, p50 and p95 latency, the
ratio of cycle throughput to trivial throughput measured in the same round, and CPU per
cycle (from /proc, each phase from start to end, warm-up included) of the server
(gunicorn's processes) against the floor's loop, each with the CPU of the PostgreSQL backends
connected to the benchmark's own database over the same phase (their pids, from
pg_stat_activity: another database's work on the machine does not count). The saturated cycle
and the floor alternate within each round.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

# Run as a script, its own folder is on the path (as the other benchmarks import it).
from benchmarks._common import (
    ROOT,
    add_database_argument,
    add_port_argument,
    ensure_bench_database,
    free_port,
    gunicorn_start,
    gunicorn_stop,
)
from core.ids import ascii_digits

PROCESSES = 4
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


CAMPAIGNS = 3  # per round: the first for the paced and lone phases, one each for the floor and the cycle


def setup_campaign(n_comparisons: int, n_annotators: int) -> None:
    """Runs in a child with Django: the labeling tables emptied, then CAMPAIGNS campaigns with
    the same comparisons, annotators and tokens (one child per round: a Django start costs)."""
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

    def steps(i, s):
        return [
            {"kind": "action", "tool": "search", "arguments": {"query": f"q{i}"}},
            {"kind": "observation", "tool": "search", "content": "result " * 40},
            {"kind": "answer", "text": f"answer {s}"},
        ]

    trajectories = Trajectory.objects.bulk_create(
        Trajectory(task=t, policy=policy, steps=steps(i, s), answer=f"answer {s}", content_hash=f"{i}-{s}", num_steps=3)
        for i, t in enumerate(tasks)
        for s in range(2)
    )
    campaigns = [
        Campaign.objects.create(name=f"bench {c}", votes_per_comparison=3, lease_seconds=600) for c in range(CAMPAIGNS)
    ]
    for campaign in campaigns:
        Comparison.objects.bulk_create(
            Comparison(
                campaign=campaign, task=tasks[i], trajectory_a=trajectories[2 * i], trajectory_b=trajectories[2 * i + 1]
            )
            for i in range(n_comparisons)
        )
    tokens, floor_annotators = [], []
    for i in range(n_annotators):
        user, _ = User.objects.get_or_create(username=f"bench-annotator-{i}")
        user_role_set(user=user, roles=[Role.ANNOTATOR])
        tokens.append(api_token_create(user=user, name="bench")[1])
        floor_user, _ = User.objects.get_or_create(username=f"bench-floor-{i}")
        floor_annotators.append(floor_user.pk)
    with connection.cursor() as cur:  # fresh statistics: the first round plans like the others
        cur.execute("ANALYZE")
    print(json.dumps({"campaigns": [c.id for c in campaigns], "tokens": tokens, "floor_annotators": floor_annotators}))


def cpu_seconds(pids) -> dict[int, float]:
    """user + system CPU of each of these processes so far (one that has gone is left out)."""
    seconds = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        seconds[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime
    return seconds


def cpu_since(before: dict[int, float], now: dict[int, float]) -> float:
    """CPU used between two readings by the processes alive at the second (a process that
    started in between counts whole; one that ended in between is lost, so the phases keep
    their connections open until read)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in now.items())


def pids_where(predicate) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if ascii_digits(entry.name):
            try:
                head, tail = (entry / "stat").read_text().rsplit(")", 1)
            except (FileNotFoundError, ProcessLookupError):
                continue
            if predicate(head.split("(", 1)[1], tail.split()):
                pids.append(int(entry.name))
    return pids


def backend_pids(database_url: str) -> list[int]:
    """The PostgreSQL backends connected to this benchmark's own database (pg_stat_activity), not
    every postgres process of the machine: another database's work, or the server's background
    processes, must not count against the app."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return [pid for (pid,) in rows]


def group_pids(pgid: int) -> list[int]:
    return pids_where(lambda _, fields: int(fields[2]) == pgid)  # the process group


class Tally:
    """One process's cycles (or requests), counted by its threads: latencies and failures after
    the warm-up, and every success, warm-up included (CPU per cycle is over the whole phase)."""

    def __init__(self, warmup_until: float):
        self.warmup_until, self.lock = warmup_until, threading.Lock()
        self.latencies, self.errors, self.total = [], 0, 0

    def add(self, start: float, elapsed: float, ok: bool) -> None:
        with self.lock:
            self.total += ok
            if start >= self.warmup_until:
                if ok:
                    self.latencies.append(elapsed)
                else:
                    self.errors += 1

    def result(self, cpu_seconds: float | None = None) -> tuple:
        """(latencies, errors, measured, total, cpu_seconds), as `phase` reads it."""
        return self.latencies, self.errors, len(self.latencies), self.total, cpu_seconds


def floor_worker(database_url, annotators, n_connections, campaign, deadline, warmup_until, out_queue, may_close):
    """One process of the floor: `n_connections` threads, each its own connection, issuing the
    cycle's statements for its share of the annotators in turn. Reports its latencies and the
    CPU its loop used."""
    from datetime import UTC, datetime, timedelta

    import psycopg

    from annotate.services import labeling_sql as sql

    tally = Tally(warmup_until)
    connections = [psycopg.connect(database_url, autocommit=True, prepare_threshold=5) for _ in range(n_connections)]
    cpu_start = time.process_time()

    def run(share, conn):
        rng = random.Random(share[0])
        cur = conn.cursor()
        turn = 0
        while (start := time.perf_counter()) < deadline:
            annotator, turn = share[turn % len(share)], turn + 1
            cur.execute(sql.CAMPAIGN, {"campaign": campaign})
            _, _, _, k, lease_seconds, _, _ = cur.fetchone()
            now = datetime.now(UTC)
            cur.execute(
                sql.LEASE_OR_TAKE,
                {
                    "campaign": campaign,
                    "gold": False,
                    "k": k,
                    "annotator": annotator,
                    "now": now,
                    "until": now + timedelta(seconds=lease_seconds),
                    "left_is_a": rng.random() < 0.5,
                },
            )
            lease = cur.fetchone()
            ok = lease is not None
            if ok:
                cur.execute(sql.SCREEN, {"assignment": lease[0], "prefill_sure": sql.PREFILL_CONFIDENCE})
                cur.fetchone()
                cur.execute(sql.SUBMIT_READ, {"assignment": lease[0], "annotator": annotator})
                read = cur.fetchone()
                now = datetime.now(UTC)
                cur.execute(
                    sql.SUBMIT_WRITE,
                    {
                        "assignment": lease[0],
                        "annotator": annotator,
                        "k": read[13],
                        "now": now,
                        "choice": rng.randint(1, 5),
                        "both_bad": False,
                        "ratings": "{}",
                        "first_wrong_step_a": None,
                        "first_wrong_step_b": None,
                        "rationale": "",
                        "seconds": (now - read[3]).total_seconds(),
                        "synthetic": False,
                        "prefill_sure": sql.PREFILL_CONFIDENCE,
                    },
                )
                ok = cur.fetchone() is not None
            tally.add(start, time.perf_counter() - start, ok)

    shares = [annotators[i::n_connections] for i in range(n_connections)]
    threads = [threading.Thread(target=run, args=pair) for pair in zip(shares, connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out_queue.put(tally.result(cpu_seconds=time.process_time() - cpu_start))
    may_close.wait(60)  # the backends live until the parent has read PostgreSQL's CPU
    for conn in connections:
        conn.close()


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

    tally = Tally(warmup_until)

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
            tally.add(start, time.perf_counter() - start, ok)
            if pace:
                time.sleep(rng.uniform(0, 2 * pace))

    threads = [threading.Thread(target=run, args=(t,)) for t in tokens]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out_queue.put(tally.result())


def phase(mode, port, tokens, campaign, seconds, warmup=2.0, pace=0.0, *, database_url, server=None, connections=0):
    """One scenario; with `server` (gunicorn's Popen) or for the floor, also CPU per cycle:
    the server's (or the floor loop's) and that of the PostgreSQL backends connected to the
    benchmark's database (those alive at the phase's end: a backend that closed during it is
    not counted; the app's keep their connections), over the whole phase."""
    pg_before = cpu_seconds(backend_pids(database_url))
    app_before = cpu_seconds(group_pids(server.pid)) if server is not None else {}
    start = time.perf_counter()
    warmup_until, deadline = start + warmup, start + warmup + seconds
    queue, may_close = mp.Queue(), mp.Event()
    chunks = [tokens[i::PROCESSES] for i in range(PROCESSES)]
    if mode == "floor":
        procs = [
            mp.Process(
                target=floor_worker,
                args=(database_url, c, n, campaign, deadline, warmup_until, queue, may_close),
            )
            for c, n in zip(chunks, [len(range(i, connections, PROCESSES)) for i in range(PROCESSES)])
            if c and n
        ]
    else:
        procs = [
            mp.Process(target=worker, args=(mode, port, c, campaign, deadline, warmup_until, pace, queue))
            for c in chunks
            if c
        ]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    pg_cpu = cpu_since(pg_before, cpu_seconds(backend_pids(database_url)))
    if mode == "floor":
        app_cpu = sum(r[4] for r in results)
    else:
        app_cpu = cpu_since(app_before, cpu_seconds(group_pids(server.pid))) if server is not None else 0.0
    may_close.set()
    for p in procs:
        p.join()
    latencies = sorted(x for r in results for x in r[0])
    errors = sum(r[1] for r in results)
    count = sum(r[2] for r in results)
    cycles = sum(r[3] for r in results)
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    row = {"per_s": count / seconds, "p50_ms": 1000 * q[49], "p95_ms": 1000 * q[94], "errors": errors, "n": count}
    if cycles and (server is not None or mode == "floor"):
        row["app_cpu_ms"] = 1000 * app_cpu / cycles
        row["db_cpu_ms"] = 1000 * pg_cpu / cycles
        row["cpu_ms"] = row["app_cpu_ms"] + row["db_cpu_ms"]
    return row


def serve(env: dict, port: int, args) -> subprocess.Popen:
    """gunicorn on 127.0.0.1:port with the flags' workers, threads and class, once /health answers."""
    server_env = {**env, **dict(kv.split("=", 1) for kv in args.server_env)}
    return gunicorn_start(
        server_env,
        port,
        workers=args.workers,
        threads=args.threads,
        worker_class=args.worker_class,
        extra=("--keep-alive", "30"),
    )


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
    parser.add_argument(
        "--floor-connections",
        type=int,
        default=0,
        help="connections of the raw-SQL floor, shared by the annotators (default: gunicorn's workers x threads)",
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
        rows = {"trivial": [], "auth": [], "floor": [], "cycle": [], "paced": [], "single": []}

        def fresh_campaigns() -> dict:
            """New campaigns (the labeling tables emptied), so each cycle phase starts alike."""
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
            return json.loads(out.stdout.strip().splitlines()[-1])

        for r in range(args.rounds):
            setup = fresh_campaigns()
            tokens, timing = setup["tokens"], (args.seconds, args.warmup)
            campaign, fresh = setup["campaigns"][0], iter(setup["campaigns"][1:])
            url = env["DATABASE_URL"]
            rows["trivial"].append(phase("trivial", port, tokens, campaign, *timing, server=server, database_url=url))
            rows["auth"].append(phase("auth", port, tokens, campaign, *timing, server=server, database_url=url))
            floor_then_server = r % 2 == 0  # alternate, so a drift in machine speed favours neither
            for mode in ("floor", "cycle") if floor_then_server else ("cycle", "floor"):
                rows[mode].append(
                    phase(
                        "floor" if mode == "floor" else "cycle",
                        port,
                        setup["floor_annotators"] if mode == "floor" else tokens,
                        next(fresh),
                        *timing,
                        server=None if mode == "floor" else server,
                        database_url=url,
                        # as many connections as gunicorn has threads: the same concurrency at PostgreSQL
                        connections=args.floor_connections or args.workers * args.threads,
                    )
                )
            rows["paced"].append(
                phase("cycle", port, tokens, campaign, *timing, pace=1.0, server=server, database_url=url)
            )
            rows["single"].append(phase("cycle", port, tokens[:1], campaign, *timing, server=server, database_url=url))
            print(f"round {r + 1}: " + json.dumps({k: v[-1] for k, v in rows.items()}), flush=True)
    finally:
        gunicorn_stop(server)

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
        ("floor", "floor: the same statements from a psycopg loop, no pause (cycles)"),
    ):
        print(
            f"| {label} | {med(kind, 'per_s'):.0f} | {med(kind, 'p50_ms'):.1f} | {med(kind, 'p95_ms'):.1f} | "
            f"{sum(x['errors'] for x in rows[kind])} |"
        )
    print(
        f"\ncycle throughput / trivial throughput, per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
        f"median {statistics.median(ratios):.2f}"
    )
    print(
        "\nCPU per cycle (per request for the first two), ms "
        "(app: gunicorn's processes, or the floor's loop; database: the PostgreSQL backends of its own database):"
    )
    print("| scenario | app | database | total |")
    print("|---|---|---|---|")
    for kind, label in (
        ("trivial", "server, GET /health"),
        ("auth", "server, GET /api/v1/whoami"),
        ("cycle", "server, next + submit, no pause"),
        ("paced", "server, next + submit, 0-2 s pause"),
        ("floor", "floor, no pause"),
    ):
        print(f"| {label} | {med(kind, 'app_cpu_ms'):.2f} | {med(kind, 'db_cpu_ms'):.2f} | {med(kind, 'cpu_ms'):.2f} |")
    total = [c["cpu_ms"] / f["cpu_ms"] for c, f in zip(rows["cycle"], rows["floor"])]
    app = [c["app_cpu_ms"] / f["app_cpu_ms"] for c, f in zip(rows["cycle"], rows["floor"])]
    print(
        f"\nserver CPU per cycle / floor's, app + database, per round: {', '.join(f'{r:.2f}' for r in total)}; "
        f"median {statistics.median(total):.2f}x"
    )
    print(
        f"server CPU per cycle / floor's, app alone, per round: {', '.join(f'{r:.2f}' for r in app)}; "
        f"median {statistics.median(app):.2f}x"
    )


if __name__ == "__main__":
    main()
