"""Import speed and memory: N trajectories of 10 steps from JSONL into PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter make bench-import
    .venv/bin/python benchmarks/import_trajectories.py --sizes 2000 10000 20000 --repeats 3
    .venv/bin/python benchmarks/import_trajectories.py --format openai --sizes 10000

Each import runs in a fresh child process (so its peak RSS is its own) against the
scratch database (`--database`, dropped and re-created at start), emptied before each
run. Reports the median wall time and the peak RSS above the process's RSS before the
import: if the import streams, that growth stays flat as N grows. The baseline, measured in the same run on the same
file, is the floor of any importer: reading and `json.loads` of every line, nothing else.
`--format openai` writes the same trajectories as OpenAI chat transcripts (what `trl` and
most agent logs look like), imported with that format named; the floor is measured on that file.
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


def make_line(i: int, n_tasks: int) -> str:
    steps = []
    for s in range(3):
        steps += [
            {"kind": "thought", "text": f"Step {s}: I should look up entity {i % n_tasks} and check the dates."},
            {"kind": "action", "tool": "search", "arguments": {"query": f"entity {i % n_tasks} founder {s}"}},
            {
                "kind": "observation",
                "tool": "search",
                "content": " ".join(
                    f"[{k}] Result {k} for run {i}: a fictional article about place {k * 7 + s}." for k in range(8)
                ),
            },
        ]
    steps.append({"kind": "answer", "text": f"Person {i}", "quotes": [f"Result 0 for run {i}"]})
    return json.dumps(
        {
            "schema": "arbiter.trajectory/v1",
            "task": {"external_id": f"bench-{i % n_tasks}", "prompt": f"Who founded entity {i % n_tasks}?"},
            "agent": {"name": "bench-agent", "version": str(i % 3)},
            "steps": steps,
            "outcome": {"correct": i % 2 == 0, "utility": float(i % 7)},
        }
    )


def openai_line(i: int, n_tasks: int) -> str:
    """make_line's trajectory as an OpenAI chat transcript (what `trl` exports look like), by
    the app's own step-to-message mapping."""
    from annotate.chat_messages import prompt_messages, steps_to_messages

    canonical = json.loads(make_line(i, n_tasks))
    messages = prompt_messages(canonical["task"]["prompt"]) + steps_to_messages(canonical["steps"])
    return json.dumps({"messages": messages, "agent": canonical["agent"]})


def write_file(path: Path, n: int, per_task: int = 4, format: str = "arbiter") -> None:
    """N lines, `per_task` trajectories of each task, canonical (`arbiter`) or `openai` chat."""
    line = openai_line if format == "openai" else make_line
    with path.open("w") as f:
        for i in range(n):
            f.write(line(i, max(1, n // per_task)) + "\n")


def parse_floor_seconds(path: Path) -> float:
    start = time.perf_counter()
    with path.open("rb") as f:
        for line in f:
            json.loads(line)
    return time.perf_counter() - start


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(path: Path, format: str = "auto") -> None:
    """One import in this process; prints JSON with seconds and memory."""
    import django

    django.setup()
    from django.db import connection

    from annotate.services.imports import trajectories_import_stream

    with connection.cursor() as cur:
        cur.execute("TRUNCATE annotate_comparison, annotate_trajectory, annotate_task, annotate_policy CASCADE")
    before = rss_mb()
    start = time.perf_counter()
    with path.open("rb") as stream:
        report = trajectories_import_stream(stream=stream, format=format)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "seconds": seconds,
                "created": report.created,
                "dropped": report.dropped,
                "rss_before_mb": before,
                "peak_rss_mb": peak,
                "growth_mb": peak - before,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 20000])
    parser.add_argument("--repeats", type=int, default=3)
    add_database_argument(parser)
    parser.add_argument(
        "--format", choices=("arbiter", "openai"), default="arbiter", help="the file's format (default: arbiter)"
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arbiter.settings")
    if args.child:
        child(args.child, "openai" if args.format == "openai" else "auto")
        return
    env = ensure_bench_database(args.database)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = Path(tmp) / f"{n}.jsonl"
            write_file(path, n, format=args.format)
            runs, floors = [], []
            for _ in range(args.repeats):
                floors.append(parse_floor_seconds(path))
                out = subprocess.run(
                    [sys.executable, __file__, "--child", str(path), "--format", args.format],
                    cwd=ROOT,
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            assert all(r["created"] == n for r in runs)
            rows.append(
                {
                    "n": n,
                    "file_mb": path.stat().st_size / 2**20,
                    "median_s": statistics.median(r["seconds"] for r in runs),
                    "per_s": n / statistics.median(r["seconds"] for r in runs),
                    "floor_s": statistics.median(floors),
                    "growth_mb": statistics.median(r["growth_mb"] for r in runs),
                    "peak_mb": statistics.median(r["peak_rss_mb"] for r in runs),
                }
            )
    print(f"format: {args.format}")
    print(
        "| trajectories (10 steps) | file MB | import median s | trajectories/s | json.loads floor s "
        "| import / floor | peak RSS MB | RSS growth MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['file_mb']:.1f} | {r['median_s']:.2f} | {r['per_s']:,.0f} | "
            f"{r['floor_s']:.2f} | {r['median_s'] / r['floor_s']:.1f}x | {r['peak_mb']:.0f} | {r['growth_mb']:.1f} |"
        )


if __name__ == "__main__":
    main()
