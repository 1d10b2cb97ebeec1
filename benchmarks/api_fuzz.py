"""Fuzz every API operation as every role with schemathesis, and print the requests and statuses.

    .venv/bin/python benchmarks/api_fuzz.py [--examples 50] [--only "whoami or campaigns"]

Runs tests/webapp/test_api_fuzz.py (the suite runs it with 10 examples per operation and
role) on a database of its own (`--database NAME`: pytest-django creates `test_NAME` on
DATABASE_URL's server and drops it at the end), then prints the counts it wrote (to a file of
this run's own, $ARBITER_FUZZ_COUNTS): how many requests, and how many answered each status.
Any 5xx fails the run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import ROOT, base_database_url, default_bench_database

DATABASE_ENV = "ARBITER_FUZZ_DATABASE"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=50, help="generated requests per operation and role")
    parser.add_argument(
        "--only",
        default="",
        metavar="EXPRESSION",
        help="fuzz only the operations and roles that match this pytest -k expression, e.g. "
        '"whoami and admin" (default: all)',
    )
    default = os.environ.get(DATABASE_ENV) or default_bench_database("_fuzz")
    parser.add_argument(
        "--database",
        default=default,
        metavar="NAME",
        help=f"the tests run on test_NAME, which pytest-django CREATES on DATABASE_URL's server and "
        f"DROPS at the end (an existing test_NAME is dropped first); NAME itself is not "
        f"touched (default: ${DATABASE_ENV}, else DATABASE_URL's name + '_fuzz': {default})",
    )
    args = parser.parse_args()
    head, own = base_database_url().rsplit("/", 1)
    if args.database == own:
        parser.error(f"--database {own} is DATABASE_URL's own: its test database may be in use by the suite")
    counts_file = Path(tempfile.mkdtemp(prefix="api-fuzz-")) / "counts.json"  # this run's, nobody else's
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},  # one pytest, not an xdist worker
        "FUZZ_EXAMPLES": str(args.examples),
        "DATABASE_URL": f"{head}/{args.database}",
        "ARBITER_FUZZ_COUNTS": str(counts_file),
    }
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/webapp/test_api_fuzz.py",
            *(["-k", args.only] if args.only else []),
        ],
        cwd=ROOT,
        env=env,
        check=False,
    )
    seconds = time.monotonic() - started
    if not counts_file.exists():
        print(f"the fuzz tests wrote no counts (pytest exit status {result.returncode})", file=sys.stderr)
        return result.returncode or 1
    counts = json.loads(counts_file.read_text())
    server_errors = sum(n for code, n in counts["statuses"].items() if code.startswith("5"))
    print(
        f"{counts['requests']:,} requests in {seconds:.0f} s ({args.examples} examples per operation and role); "
        f"statuses: "
        + ", ".join(f"{code}: {n:,}" for code, n in counts["statuses"].items())
        + f"; server errors: {server_errors}"
    )
    return result.returncode or (1 if server_errors else 0)


if __name__ == "__main__":
    sys.exit(main())
