"""What finding each record's line costs when a JSON document is imported (issue 53).

    .venv/bin/python benchmarks/record_lines.py --mb 60 --repeats 3

Writes a pretty-printed Langfuse export (a JSON array, indent 2, as Langfuse's "Export"
writes it) of about --mb megabytes from the test fixture's records, then reads its records
with `annotate.input_records.records` (ijson, each record re-encoded as JSON text, as the
import reads them) with the line scan (`_Starts`) and with the scan switched off (its `feed` a no-op), alternately,
and prints the medians and their ratio. Reading records is the part of an import the scan
adds to; the rest of an import (decoding, converting, storing) is unchanged and takes longer.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
input_records = importlib.import_module("annotate.input_records")  # from the repository root just put on the path

FIXTURE = ROOT / "tests/annotate/trace_formats/fixtures/langfuse/export.json"


def _write(path: Path, megabytes: float) -> int:
    rows = json.loads(FIXTURE.read_text())
    chunk = json.dumps(rows, indent=2)[1:-2]  # the items, each "  {...}", without the brackets
    copies = max(1, int(megabytes * 1e6 / len(chunk)))
    with path.open("w") as out:
        out.write("[" + ",".join([chunk] * copies) + "\n]")
    return copies * len(rows)


def _read(path: Path) -> tuple[float, int, int]:
    started = time.perf_counter()
    with path.open("rb") as stream:
        layout, numbered = input_records.records(stream)
        count, last = 0, 0
        for position, _text in numbered:
            count, last = count + 1, getattr(position, "line", None) or 0
    return time.perf_counter() - started, count, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=60, help="size of the document (MB)")
    parser.add_argument("--repeats", type=int, default=3, help="reads of each kind, alternated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "export.json"
        records = _write(path, args.mb)
        feed = input_records._Starts.feed
        times: dict[str, list[float]] = {"with the line scan": [], "without": []}
        for _ in range(args.repeats):
            for kind in times:
                input_records._Starts.feed = feed if kind == "with the line scan" else (lambda self, chunk: None)
                seconds, count, last = _read(path)
                assert count == records
                if kind == "with the line scan":
                    assert last > 1, "the scan found no lines"
                times[kind].append(seconds)
        input_records._Starts.feed = feed
        size = path.stat().st_size / 1e6
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    print(f"{records:,} records, {size:.1f} MB, medians of {args.repeats}:")
    for kind, seconds in medians.items():
        print(f"  {kind}: {seconds:.2f} s ({size / seconds:.1f} MB/s)")
    print(f"  the scan adds {medians['with the line scan'] / medians['without'] - 1:+.0%} to reading the records")


if __name__ == "__main__":
    main()
