"""Trace-format import speed and memory against the OpenAI-chat import of the same trajectories.

    .venv/bin/python benchmarks/import_traces.py --sizes 2000 10000 --repeats 3
    .venv/bin/python benchmarks/import_traces.py --formats langsmith --sizes 10000
    .venv/bin/python benchmarks/import_traces.py --document --formats otel --sizes 60000 --repeats 1

For each size N, the same N ten-step trajectories (benchmarks/import_trajectories.py
`make_line`: three rounds of thought, `search` call and result, then the answer) are written
as an OpenAI chat transcript per line (the baseline) and in each trace format as its tool
exports it (benchmarks/trace_generators/<format>.py: a model call per round carrying the
growing history, a tool span or run per search). The records of 16 traces at a time are
interleaved round-robin, as a live exporter writes concurrent runs, so the import has to
group them. Each import runs in a fresh child process against the scratch database
(`--database`, dropped and re-created at start), emptied first, with `--format` named. The
runs are interleaved (OpenAI, format A, OpenAI, format B, ..., repeated), and each format's
ratio is the median over repeats of its time divided by the OpenAI import run just before
it, so a drift in machine speed cannot pick the winner. The table gives medians, that
ratio, and the peak RSS growth of the process (flat in N if the import streams).

With --document each trace file is one JSON document instead, as tools also write them
(annotate/input_records.py): for the span formats one OTLP request holding every resource
span, pretty-printed (an indent of one space per level), for LangSmith and Langfuse one JSON
array; the baseline stays OpenAI chat JSONL. The file is written a record at a time, so the
benchmark itself never holds it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._common import add_database_argument, ensure_bench_database
from benchmarks.import_trajectories import child, openai_line

ROOT = Path(__file__).resolve().parent.parent

FORMATS = ("otel", "openinference", "langsmith", "langfuse")
INTERLEAVE = 16


def _document_record(line: str, fmt: str) -> str:
    """A JSONL record as it sits inside one document: a resource span of the OTLP request
    (indented), or an item of the array."""
    if fmt in ("otel", "openinference"):
        spans = json.loads(line)["resourceSpans"]
        return ",\n".join(json.dumps(span, indent=1) for span in spans)
    return line


def write_file(path: Path, n: int, fmt: str, *, document: bool = False) -> int:
    """Write N trajectories in `fmt` (JSONL, or one JSON document); returns the number of records."""
    n_tasks = max(1, n // 4)
    written = 0
    with path.open("w") as f:
        if fmt == "openai":
            for i in range(n):
                f.write(openai_line(i, n_tasks) + "\n")
            return n
        generator = importlib.import_module(f"trace_generators.{fmt}")
        document = document and fmt != "openai"
        if document:
            f.write('{\n"resourceSpans": [\n' if fmt in ("otel", "openinference") else "[\n")
        for start in range(0, n, INTERLEAVE):
            traces = [generator.trace_lines(i, n_tasks) for i in range(start, min(n, start + INTERLEAVE))]
            for k in range(max(map(len, traces))):
                for lines in traces:
                    if k < len(lines):
                        if document:
                            f.write((",\n" if written else "") + _document_record(lines[k], fmt))
                        else:
                            f.write(lines[k] + "\n")
                        written += 1
        if document:
            f.write("\n]\n}\n" if fmt in ("otel", "openinference") else "\n]\n")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    parser.add_argument("--document", action="store_true", help="trace files as one JSON document each")
    add_database_argument(parser)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1])
        return
    env = ensure_bench_database(args.database)

    def run(path: Path, fmt: str) -> dict:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(path), fmt],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["created"] == n, (fmt, result)
        return result

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            files = {}
            for fmt in ["openai", *args.formats]:
                path = Path(tmp) / f"{fmt}-{n}.{'json' if args.document and fmt != 'openai' else 'jsonl'}"
                files[fmt] = (path, write_file(path, n, fmt, document=args.document))
            # Interleaved: OpenAI, format A, OpenAI, format B, ..., repeated; each format is
            # divided by the OpenAI import run just before it, so a drift in machine speed
            # cannot pick the winner.
            runs = {fmt: [] for fmt in files}
            ratios = {fmt: [] for fmt in args.formats}
            for _ in range(args.repeats):
                for fmt in args.formats:
                    baseline = run(files["openai"][0], "openai")
                    runs["openai"].append(baseline)
                    runs[fmt].append(run(files[fmt][0], fmt))
                    ratios[fmt].append(runs[fmt][-1]["seconds"] / baseline["seconds"])
            for fmt, (path, records) in files.items():
                rows.append(
                    {
                        "n": n,
                        "fmt": fmt,
                        "records": records,
                        "mb": path.stat().st_size / 2**20,
                        "median": statistics.median(r["seconds"] for r in runs[fmt]),
                        "ratio": statistics.median(ratios[fmt]) if fmt in ratios else 1.0,
                        "ratios": ratios.get(fmt, []),
                        "growth": statistics.median(r["growth_mb"] for r in runs[fmt]),
                        "peak": statistics.median(r["peak_rss_mb"] for r in runs[fmt]),
                    }
                )
                path.unlink()
                print(json.dumps(rows[-1]), file=sys.stderr)
    print(
        f"| trajectories | format{' (one JSON document)' if args.document else ''} | records | file MB | import median s | "
        "/ OpenAI import (median of interleaved pairs) | "
        "peak RSS MB | RSS growth MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['fmt']} | {r['records']:,} | {r['mb']:.1f} | {r['median']:.2f} | "
            f"{r['ratio']:.2f}x | {r['peak']:.0f} | {r['growth']:.1f} |"
        )


if __name__ == "__main__":
    main()
