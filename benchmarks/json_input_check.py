"""Strict JSON decoding (core/json_input.py) against the full walk of every value, with plain
`json.loads` as the floor.

    .venv/bin/python benchmarks/json_input_check.py --lines 5000 --repeats 5

`json_input.loads` refuses what cannot be stored (NUL, lone surrogates, non-finite numbers,
nesting past 64 levels). It used to walk every decoded value (`check`); it now walks the
containers only, and the strings only when the text holds a `\\u0000` or surrogate escape.
Both are timed here in one process on the same lines: the import benchmark's canonical
trajectories and the same trajectories as OpenTelemetry GenAI spans (benchmarks/
trace_generators/otel.py). Reports medians of the repeats and the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from benchmarks.import_trajectories import make_line
from benchmarks.trace_generators import otel
from core import json_input

ROOT = Path(__file__).resolve().parent.parent


def walk_everything(raw: bytes) -> None:
    """The former `loads`: decode, then `check` every value."""
    value = json.loads(
        raw.decode("utf-8"), parse_constant=json_input._refuse_constant, parse_float=json_input._finite_float
    )
    json_input.check(value)


def plain(raw: bytes) -> None:
    json.loads(raw)


def timed(function, lines: list[bytes], repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for line in lines:
            function(line)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n_tasks = max(1, args.lines // 4)
    inputs = {
        "canonical": [make_line(i, n_tasks).encode() for i in range(args.lines)],
        "otel": [line.encode() for i in range(args.lines) for line in otel.trace_lines(i, n_tasks)],
    }
    print("| lines | MB | json.loads (floor) s | walk every value s | json_input.loads s | loads / walk |")
    print("|---|---|---|---|---|---|")
    for name, lines in inputs.items():
        floor = timed(plain, lines, args.repeats)
        everything = timed(walk_everything, lines, args.repeats)
        after = timed(json_input.loads, lines, args.repeats)
        mb = sum(map(len, lines)) / 2**20
        print(
            f"| {len(lines):,} {name} | {mb:.1f} | {floor:.2f} | {everything:.2f} | {after:.2f} "
            f"| {after / everything:.2f} |"
        )


if __name__ == "__main__":
    main()
