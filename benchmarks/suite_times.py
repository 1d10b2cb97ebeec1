"""The test suite's wall time, idle and beside a CPU load, the way CI runs it (`make test`).

    .venv/bin/python benchmarks/suite_times.py [--stress 0 4] [--select tests/...] [--workers N]

For each load in `--stress` (0: idle; N: `stress-ng --cpu N` started beside the suite and
stopped by its PID afterwards) it runs `make test` once and prints the wall time, pytest's own
count and time, the mean load average it ran under, and the ten slowest tests. `--select` passes
test paths (or -k/-m expressions) to pytest, so a part of the suite can be timed (the smoke
test times one small file).

The suite runs on its own databases, so it can be timed while another run of the suite is
going: `--database NAME` (default: DATABASE_URL's name + '_suite'; pytest-django creates and
drops test_NAME, test_NAME_gw0, ... on DATABASE_URL's server) and `--broker-db N` (the Redis
database of its broker, default 11; workers take N, N-1, ...).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time

from benchmarks._common import ROOT, base_database_url, default_bench_database

SUMMARY = re.compile(r"^=*\s*(?P<counts>\d+ (?:passed|failed|error).*?) in (?P<seconds>[\d.]+)s", re.MULTILINE)
DURATION = re.compile(r"^(?P<seconds>[\d.]+)s (?P<phase>call|setup|teardown)\s+(?P<test>.+)$", re.MULTILINE)


def _sample_load(proc: subprocess.Popen, loads: list[float]) -> None:
    """The 1-minute load average every 5 s while the suite runs."""
    while proc.poll() is None:
        loads.append(os.getloadavg()[0])
        time.sleep(5)


def run_suite(*, select: list[str], workers: int | None, database: str, broker_db: int, durations: int) -> dict:
    head = base_database_url().rsplit("/", 1)[0]
    pytest_args = ["-p", "no:cacheprovider", "-q", f"--durations={durations}", *select]
    command = ["make", "test", f"PYTEST_ARGS={shlex.join(pytest_args)}"]
    if workers is not None:
        command.append(f"TEST_WORKERS={workers}")
    env = {
        **os.environ,
        "TEST_DATABASE_URL": f"{head}/{database}",
        "TEST_BROKER_URL": f"redis://127.0.0.1:6379/{broker_db}",
    }
    for name in list(env):  # the suite's own, from the Makefile (never those of a test that calls this)
        if name in ("DATABASE_URL", "CELERY_BROKER_URL", "ARBITER_VAR_DIR") or name.startswith(
            ("PYTEST_", "ARBITER_TEST_", "ARBITER_BENCH_", "ARBITER_FUZZ_")
        ):
            env.pop(name)
    loads: list[float] = []
    started = time.monotonic()
    with subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        sampler = threading.Thread(target=_sample_load, args=(proc, loads), daemon=True)
        sampler.start()
        out = proc.stdout.read()
        proc.wait()
    wall = time.monotonic() - started
    log = ROOT / "test-output" / f"suite-times-{database}-{int(time.time())}.log"
    log.parent.mkdir(exist_ok=True)
    log.write_text(out)  # the whole output: a failure's detail, not only the tail
    summary = SUMMARY.search(out)
    slowest = [(float(m["seconds"]), m["phase"], m["test"].strip()) for m in DURATION.finditer(out)]
    return {
        "exit": proc.returncode,
        "wall": wall,
        "counts": summary["counts"] if summary else "(no summary)",
        "pytest_seconds": float(summary["seconds"]) if summary else None,
        "load": sum(loads) / len(loads) if loads else os.getloadavg()[0],
        "slowest": sorted(slowest, reverse=True),
        "tail": out[-3000:],
        "log": str(log),
    }


def by_test_file(slowest: list[tuple[float, str, str]]) -> dict[str, tuple[float, int]]:
    """{test file: (seconds, phases)} of pytest's slowest phases, the costliest file first."""
    files: dict[str, list[float]] = {}
    for seconds, _, test in slowest:
        files.setdefault(test.split("::", 1)[0], []).append(seconds)
    ranked = sorted(files.items(), key=lambda item: -sum(item[1]))
    return {path: (sum(times), len(times)) for path, times in ranked}


def minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--stress", type=int, nargs="+", default=[0], help="CPU workers of stress-ng beside each run (0: idle)"
    )
    parser.add_argument("--select", nargs="*", default=[], help="pytest arguments that pick the tests (default: all)")
    parser.add_argument("--workers", type=int, default=None, help="TEST_WORKERS (default: the Makefile's)")
    parser.add_argument(
        "--database",
        default=default_bench_database("_suite"),
        metavar="NAME",
        help="the suite's database name: pytest-django CREATES and DROPS test_NAME and test_NAME_gwN "
        "(default: DATABASE_URL's name + '_suite')",
    )
    parser.add_argument("--broker-db", type=int, default=11, help="Redis database of the suite's broker")
    parser.add_argument(
        "--durations",
        type=int,
        default=10,
        help="the N slowest phases (pytest's --durations): the ten slowest are printed, and these N summed by file",
    )
    args = parser.parse_args()
    if any(args.stress) and not shutil.which("stress-ng"):
        raise SystemExit("stress-ng is not installed (apt-get install -y stress-ng)")

    rows = []
    for load in args.stress:
        stress = None
        if load:
            stress = subprocess.Popen(
                ["stress-ng", "--cpu", str(load), "--timeout", "7200s", "--quiet"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(2)
        try:
            result = run_suite(
                select=args.select,
                workers=args.workers,
                database=args.database,
                broker_db=args.broker_db,
                durations=args.durations,
            )
        finally:
            if stress is not None:
                stress.terminate()
                stress.wait(timeout=30)
        rows.append((load, result))
        if result["exit"] != 0:
            print(result["tail"], f"\n(the whole output: {result['log']})", file=sys.stderr)

    print("| load beside | make test wall time | pytest's count | result | mean load average (1 min) |")
    print("|---|---|---|---|---|")
    for load, r in rows:
        beside = f"stress-ng --cpu {load}" if load else "idle"
        status = "passed" if r["exit"] == 0 else f"exit {r['exit']}"
        print(
            f"| {beside} | {minutes(r['wall'])} | {minutes(r['pytest_seconds'])} | {r['counts']} ({status}) "
            f"| {r['load']:.1f} |"
        )
    for load, r in rows:
        print(f"\nThe ten slowest ({'idle' if not load else f'stress-ng --cpu {load}'}):\n")
        print("| seconds | phase | test |")
        print("|---|---|---|")
        for seconds, phase, test in r["slowest"][:10]:
            print(f"| {seconds:.1f} | {phase} | {test} |")
        by_file = by_test_file(r["slowest"])
        total = sum(seconds for seconds, _, _ in r["slowest"])
        print(f"\nThe {len(r['slowest'])} slowest phases ({total:.0f} worker-seconds) by file, the first 15:\n")
        print("| file | seconds | phases |")
        print("|---|---|---|")
        for path, (seconds, count) in list(by_file.items())[:15]:
            print(f"| {path} | {seconds:.0f} | {count} |")
    if any(r["exit"] for _, r in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
