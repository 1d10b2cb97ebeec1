"""Fuzz every API operation as every role with schemathesis, and print the requests and statuses.

    .venv/bin/python benchmarks/api_fuzz.py [--examples 50]

Runs tests/webapp/test_api_fuzz.py (the suite runs it with 10 examples per operation and
role) against a scratch test database (`<db>_fuzz`), then prints the counts it wrote to
test-output/api-fuzz-counts.json: how many requests, and how many answered each status.
Any 5xx fails the run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from _common import ROOT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=50, help="generated requests per operation and role")
    args = parser.parse_args()
    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arbiter")
    env = {**os.environ, "FUZZ_EXAMPLES": str(args.examples), "DATABASE_URL": base.rsplit("/", 1)[0] + "/arbiter_fuzz"}
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/webapp/test_api_fuzz.py"], cwd=ROOT, env=env)
    seconds = time.monotonic() - started
    counts = json.loads((ROOT / "test-output" / "api-fuzz-counts.json").read_text())
    server_errors = sum(n for code, n in counts["statuses"].items() if code.startswith("5"))
    print(f"{counts['requests']:,} requests in {seconds:.0f} s ({args.examples} examples per operation and role); "
          f"statuses: " + ", ".join(f"{code}: {n:,}" for code, n in counts["statuses"].items())
          + f"; server errors: {server_errors}")
    return result.returncode or (1 if server_errors else 0)


if __name__ == "__main__":
    sys.exit(main())
