"""Filling a campaign from stored trajectories: preview and build time, and memory.

    .venv/bin/python benchmarks/campaign_fill.py --sizes 5000 20000 --repeats 3
    .venv/bin/python benchmarks/campaign_fill.py --sizes 133336 --per-task 16 --cap 120 --repeats 1   # 1M comparisons

Against the scratch PostgreSQL database (`--database`, dropped and re-created at start, and
emptied before each repeat), one child process
imports N ten-step trajectories (the import benchmark's lines: `--per-task` per task, four
unless given, three agent versions), then a fresh child fills a campaign from that import
batch with `all_pairs` (cap `--cap` per task, 10 unless given: 6 pairs per task of four) and
with `policy_vs_policy` (two of the file's three agent versions). On PostgreSQL the fill
writes by COPY and INSERT ... SELECT, with no model object per comparison. Reported: the
median seconds of the preview (counts only), of the fill (plan and insert), the
comparisons made per second, and the peak RSS growth. The baseline, measured in the same
process, is the floor of any fill: reading the selected rows' (id, task, outcome) once.
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
from benchmarks.import_trajectories import rss_mb, write_file

ROOT = Path(__file__).resolve().parent.parent

STRATEGIES = ("all_pairs", "policy_vs_policy")


def setup(path: Path) -> None:
    """Empty the scratch database and import the file (its own process: its memory is not the fill's)."""
    import django

    django.setup()
    from django.conf import settings
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.db import connection

    from annotate.services.imports import import_upload_create

    with connection.cursor() as cur:
        cur.execute(
            "TRUNCATE annotate_campaignfill, annotate_comparison, annotate_trajectory, annotate_task, "
            "annotate_policy, annotate_importbatch, annotate_campaign CASCADE"
        )
    settings.IMPORT_INLINE_MAX_BYTES = 10**10  # import in this process
    batch = import_upload_create(
        upload=SimpleUploadedFile(path.name, path.read_bytes()), campaign=None, created_by=None
    )
    assert batch.status == "succeeded", batch.message


def child(cap: int) -> None:
    """Preview, fill and fill again (idempotent) for each strategy; prints JSON."""
    import django

    django.setup()
    from django.conf import settings

    from annotate.models import Campaign, ImportBatch, Policy, Trajectory
    from annotate.services.campaign_fill import campaign_fill_create, fill_preview, fill_request_clean

    settings.FILL_INLINE_MAX_TRAJECTORIES = 10**9  # fill in this process: the job runs the same code
    batch = ImportBatch.objects.get()
    out = {"trajectories": batch.created_count}
    before = rss_mb()
    start = time.perf_counter()
    for _ in (
        Trajectory.objects.filter(import_batch=batch).values_list("id", "task_id", "outcome").iterator(chunk_size=2000)
    ):
        pass
    out["floor_s"] = time.perf_counter() - start
    arena = dict(Policy.objects.filter(name="bench-agent").values_list("version", "pk"))
    for strategy in STRATEGIES:
        campaign = Campaign.objects.create(name=f"bench {strategy}")
        request = fill_request_clean(
            {
                "import_batches": [batch.pk],
                "strategy": strategy,
                "max_per_task": cap,
                "policy_a": arena["0"],
                "policy_b": arena["1"],
            }
        )
        start = time.perf_counter()
        preview = fill_preview(campaign=campaign, request=request)
        out[f"{strategy}_preview_s"] = time.perf_counter() - start
        start = time.perf_counter()
        fill = campaign_fill_create(campaign=campaign, request=request, created_by=None)
        out[f"{strategy}_fill_s"] = time.perf_counter() - start
        assert fill.status == "succeeded" and fill.created_count == preview["comparisons"], fill.message
        out[f"{strategy}_comparisons"] = fill.created_count
        again = campaign_fill_create(campaign=campaign, request=request, created_by=None)
        assert again.created_count == 0  # idempotent
    out["growth_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--per-task", type=int, default=4, help="trajectories per task in the file (default: 4)")
    parser.add_argument("--cap", type=int, default=10, help="the fill's max_per_task (default: 10)")
    add_database_argument(parser)
    parser.add_argument("--setup", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arbiter.settings")
    if args.setup:
        setup(args.setup)
        return
    if args.child:
        child(args.cap)
        return
    env = ensure_bench_database(args.database)
    print(
        "| trajectories | strategy | comparisons | preview median s | fill median s | comparisons/s "
        "| rows-read floor s | fill / floor | peak RSS growth MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = Path(tmp) / f"{n}.jsonl"
            write_file(path, n, args.per_task)
            runs = []
            for _ in range(args.repeats):
                subprocess.run(
                    [sys.executable, __file__, "--setup", str(path)], cwd=ROOT, env=env, check=True, capture_output=True
                )
                done = subprocess.run(
                    [sys.executable, __file__, "--child", "--cap", str(args.cap)],
                    cwd=ROOT,
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            floor = statistics.median(r["floor_s"] for r in runs)
            growth = statistics.median(r["growth_mb"] for r in runs)
            for strategy in STRATEGIES:
                preview = statistics.median(r[f"{strategy}_preview_s"] for r in runs)
                fill = statistics.median(r[f"{strategy}_fill_s"] for r in runs)
                made = runs[0][f"{strategy}_comparisons"]
                print(
                    f"| {n:,} | {strategy} | {made:,} | {preview:.2f} | {fill:.2f} | {made / fill:,.0f} | "
                    f"{floor:.2f} | {fill / floor:.1f}x | {growth:.0f} |"
                )


if __name__ == "__main__":
    main()
