"""Export speed and memory: N judgements from PostgreSQL to Parquet (`raw` format).

    .venv/bin/python benchmarks/export_judgements.py --sizes 100000 1000000 --repeats 3

For each size, the scratch database (`--database`, dropped and re-created at start) is filled
through the app's own models: N / 4 comparisons with four submitted judgements each by 200
annotators, built with the models' `bulk_create`, so a column the schema gains later gets the
model's default (the SQL fill this replaced fell behind the NOT NULL columns added after it),
and frozen into a snapshot by the snapshot service (`snapshot_create`, built in the process).
The fill is slower than SQL was (4.4 minutes for a million on the 2-core VM) and is not timed.
Then, in fresh child processes, interleaved (plain COPY, query COPY, export, repeated):
(1) the plain floor: `COPY annotate_judgement TO STDOUT (FORMAT csv)`, the judgement rows
the export exports (the snapshot holds every judgement of the scratch database) with no
join, order or computed column, read to the end by psycopg;
(2) the query floor: PostgreSQL's own `COPY (SELECT ...) TO STDOUT` of the export's query
(its joins, order and computed columns), read the same way; and
(3) the export through `annotate.exports` to a Parquet file (that COPY parsed by pyarrow
in blocks and written with zstd), in a process that first did what a worker does once when it
starts (`export_libraries_load`: pyarrow's first conversion of a Python object imports pandas,
0.3 s idle and over 1 s loaded; its time is reported apart, `worker start s`, as it is paid once
per worker and not by any export). Reports medians of wall time, rows per second, the
ratio of the export to each floor, and the export's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import add_database_argument, ensure_bench_database

ROOT = Path(__file__).resolve().parent.parent

ANNOTATORS = 200
VOTES = 4
CHUNK = 5000  # comparisons built and written at a time: memory stays flat at a million judgements


def fill_child(n: int) -> None:
    """Empty the labeling tables and fill them through the models; prints JSON with the counts."""
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from annotate.models import (
        Assignment,
        Campaign,
        Comparison,
        DatasetSnapshot,
        Judgement,
        Policy,
        SnapshotJudgement,
        SnapshotPair,
        Task,
        Trajectory,
    )
    from annotate.services.datasets import snapshot_create
    from webapp.models import User

    tables = [
        m._meta.db_table
        for m in (
            SnapshotJudgement,
            SnapshotPair,
            DatasetSnapshot,
            Judgement,
            Assignment,
            Comparison,
            Trajectory,
            Task,
            Policy,
            Campaign,
        )
    ]
    with connection.cursor() as cur:
        cur.execute(f"TRUNCATE {', '.join(tables)} CASCADE")
    User.objects.filter(username__startswith="bench-").delete()
    users = []
    for i in range(ANNOTATORS):
        user = User(username=f"bench-{i + 1}")
        user.set_unusable_password()
        users.append(user)
    annotators = [u.pk for u in User.objects.bulk_create(users)]
    policy = Policy.objects.create(name="bench")
    campaign = Campaign.objects.create(name="bench", votes_per_comparison=VOTES)
    now = timezone.now()
    steps = [{"kind": "answer", "text": "x"}]
    for start in range(0, n // VOTES, CHUNK):
        numbers = range(start, min(n // VOTES, start + CHUNK))
        tasks = Task.objects.bulk_create(Task(external_id=f"bench-{i}", prompt=f"Question {i}?") for i in numbers)
        pairs = Trajectory.objects.bulk_create(
            Trajectory(
                task=task,
                policy=policy,
                steps=steps,
                answer="x",
                content_hash=f"bench-{task.external_id}-{s}",
                num_steps=1,
            )
            for task in tasks
            for s in (0, 1)
        )
        comparisons = Comparison.objects.bulk_create(
            Comparison(
                campaign=campaign,
                task=task,
                trajectory_a=pairs[2 * k],
                trajectory_b=pairs[2 * k + 1],
                status=Comparison.Status.COMPLETE,
                votes=VOTES,
                slots_taken=VOTES,
            )
            for k, task in enumerate(tasks)
        )
        assignments = Assignment.objects.bulk_create(
            Assignment(
                comparison=c,
                annotator_id=annotators[(c.pk * VOTES + v) % ANNOTATORS],
                left_is_a=(c.pk + v) % 2 == 0,
                status=Assignment.Status.SUBMITTED,
                leased_until=now,
                shown_at=now,
                finished_at=now,
            )
            for c in comparisons
            for v in range(VOTES)
        )
        Judgement.objects.bulk_create(
            Judgement(
                comparison_id=a.comparison_id,
                annotator_id=a.annotator_id,
                assignment=a,
                choice=1 + a.pk % 5,
                ratings={"correctness": {"A": 4}},
                first_wrong_step_b=0 if a.pk % 7 == 0 else None,
                rationale="because the left one quotes its source",
                seconds=12.5 + a.pk % 30,
            )
            for a in assignments
        )
    settings.SNAPSHOT_INLINE_MAX_JUDGEMENTS = n  # built here, as the job would build it
    snapshot = snapshot_create(name="bench", campaigns=[campaign])
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    print(
        json.dumps(
            {
                "judgements": Judgement.objects.count(),
                "snapshot": snapshot.status,
                "frozen": snapshot.stats.get("judgements"),
            }
        )
    )


PLAIN_COPY = "COPY annotate_judgement TO STDOUT (FORMAT csv)"


def floor_child(kind: str) -> None:
    """PostgreSQL's own COPY, read to the end: of the judgement table (`plain`), or of the
    export's query (`query`: the same SELECT)."""
    import django

    django.setup()
    from django.db import connection

    from annotate.export_copy import RawCopyBatches
    from annotate.models import DatasetSnapshot

    if kind == "plain":
        connection.ensure_connection()
        statement = PLAIN_COPY
    else:
        statement = RawCopyBatches(DatasetSnapshot.objects.get(name="bench"), None).copy_sql()
    start = time.perf_counter()
    rows = 0
    with connection.connection.cursor() as cursor, cursor.copy(statement) as copy:
        for data in copy:
            rows += bytes(data).count(b"\n")
    print(json.dumps({"seconds": time.perf_counter() - start, "rows": rows}))


def export_child(out: str) -> None:
    import django

    django.setup()
    from annotate.export_copy import export_libraries_load
    from annotate.exports import export_file
    from annotate.models import DatasetSnapshot

    snapshot = DatasetSnapshot.objects.get(name="bench")
    start = time.perf_counter()
    export_libraries_load()  # what a worker does once when it starts (annotate/tasks.py)
    worker_start = time.perf_counter() - start
    start = time.perf_counter()
    rows = export_file(snapshot, "raw", Path(out))
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "rows": rows, "peak_rss_mb": peak, "worker_start": worker_start}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[100_000, 1_000_000],
        help=f"judgements to export, multiples of {VOTES} ({VOTES} per comparison; default: 100000 1000000)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="fresh processes timed per size; medians are reported (default: 3)"
    )
    add_database_argument(parser)
    parser.add_argument("--fill-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--floor-child", choices=["plain", "query"], help=argparse.SUPPRESS)
    parser.add_argument("--export-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arbiter.settings")
    if args.fill_child:
        return fill_child(args.fill_child)
    if args.floor_child:
        return floor_child(args.floor_child)
    if args.export_child:
        return export_child(args.export_child)
    if any(n <= 0 or n % VOTES for n in args.sizes):
        parser.error(f"--sizes: each a positive multiple of {VOTES}")

    env = ensure_bench_database(args.database)
    results = []
    for n in args.sizes:
        t = time.perf_counter()
        out = subprocess.run(
            [sys.executable, __file__, "--fill-child", str(n)],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        filled = json.loads(out.stdout.strip().splitlines()[-1])
        assert filled == {"judgements": n, "snapshot": "succeeded", "frozen": n}, filled
        print(f"filled {n:,} judgements in {time.perf_counter() - t:.0f} s", flush=True)
        plains, floors, exports = [], [], []
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(args.repeats):
                for kind, into in (("plain", plains), ("query", floors)):
                    out = subprocess.run(
                        [sys.executable, __file__, "--floor-child", kind],
                        cwd=ROOT,
                        env=env,
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    into.append(json.loads(out.stdout.strip().splitlines()[-1]))
                target = Path(tmp) / "raw.parquet"
                out = subprocess.run(
                    [sys.executable, __file__, "--export-child", str(target)],
                    cwd=ROOT,
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                exports.append(json.loads(out.stdout.strip().splitlines()[-1]))
                size_mb = target.stat().st_size / 2**20
        assert all(e["rows"] == n for e in exports), exports
        assert all(f["rows"] == n for f in floors + plains), (floors, plains)
        plain_s = statistics.median(f["seconds"] for f in plains)
        floor_s = statistics.median(f["seconds"] for f in floors)
        export_s = statistics.median(e["seconds"] for e in exports)
        peak = statistics.median(e["peak_rss_mb"] for e in exports)
        start_s = statistics.median(e["worker_start"] for e in exports)
        results.append((n, plain_s, floor_s, export_s, peak, size_mb, start_s))
        print(json.dumps({"n": n, "plain": plains, "floors": floors, "exports": exports}), flush=True)
    print(
        "\n| judgements | plain COPY s | query COPY s | export s | export rows/s | export / plain COPY "
        "| export / query COPY | peak RSS MB | Parquet MB | worker start s (once per worker) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, plain_s, floor_s, export_s, peak, size_mb, start_s in results:
        print(
            f"| {n:,} | {plain_s:.3f} | {floor_s:.3f} | {export_s:.3f} | {n / export_s:,.0f} | "
            f"{export_s / plain_s:.2f}x | {export_s / floor_s:.2f}x | {peak:.0f} | {size_mb:.1f} | {start_s:.2f} |"
        )


if __name__ == "__main__":
    main()
