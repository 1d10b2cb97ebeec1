"""The cost of one tool call through an MCP server (stdio and streamable HTTP) against the same
call in process, and what a killed server costs.

    .venv/bin/python benchmarks/mcp_call_cost.py [--calls 300] [--repeats 3] [--restarts 5]

The tool is the arithmetic environment's calculator: in process through
`ArithmeticEnvironment` (the floor), and served by tests/training/mcp_calculator_server.py
through `MCPEnvironment`, over stdio and over HTTP; all through the same `EpisodeRunner`
(schema check, record). The three are measured interleaved (floor, stdio, HTTP, repeated), so
a drift in machine speed cannot pick the winner. Then a server that dies after every
`--crash-after` calls: the call that finds it dead (restart and repeat) against a plain one,
and the run-ending ToolServerLost once its restarts are spent. Prints medians and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from training.envs.arithmetic import ArithmeticEnvironment
from training.envs.base import EpisodeRunner, Limits, ToolServerLost
from training.envs.mcp import MCPEnvironment

ROOT = Path(__file__).resolve().parent.parent

SERVER = [sys.executable, str(ROOT / "tests/training/mcp_calculator_server.py")]


def per_call(env, tool: str, calls: int) -> float:
    runner = EpisodeRunner(env, Limits(max_steps=calls + 1, loop_repeats=calls + 1))
    episode = runner.start(env.tasks("train")[0])
    started = time.perf_counter()
    for i in range(calls):
        episode.call(tool, {"expression": f"{i} * 17 - 95"})
    return (time.perf_counter() - started) / calls


def http_server(port: int) -> subprocess.Popen:
    proc = subprocess.Popen([*SERVER, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the HTTP MCP server did not start within 30 s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def restart_cost(tasks: Path, crash_after: int, restarts: int) -> dict:
    """Seconds of the calls that find the server dead (restart, then the call) and of the others,
    until ToolServerLost ends the run."""
    env = MCPEnvironment(
        server=SERVER,
        tasks=tasks,
        restarts=restarts,
        server_env=dict(os.environ, ARBITER_TEST_CRASH_AFTER=str(crash_after)),
    )
    plain, restarted, lost_after = [], [], None
    try:
        for i in range(crash_after * (restarts + 2)):
            before = env.restarts
            started = time.perf_counter()
            try:
                env.call(None, "calculate", {"expression": f"{i} + 1"})
            except ToolServerLost:
                lost_after = time.perf_counter() - started
                break
            (restarted if env.restarts > before else plain).append(time.perf_counter() - started)
    finally:
        env.close()
    return {
        "plain_ms": 1e3 * statistics.median(plain),
        "restart_s": statistics.median(restarted),
        "restarts": len(restarted),
        "lost_s": lost_after,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--crash-after", type=int, default=20)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    local = ArithmeticEnvironment(seed=0, n_tasks=20)
    port = free_port()
    server = http_server(port)
    with tempfile.TemporaryDirectory() as tmp:
        tasks = Path(tmp) / "tasks.jsonl"
        tasks.write_text(
            "\n".join(
                json.dumps(
                    {"external_id": t.external_id, "prompt": t.prompt, "reference": t.reference, "split": t.split}
                )
                for t in local.tasks("train")
            )
            + "\n"
        )
        started = time.perf_counter()
        stdio = MCPEnvironment(server=SERVER, tasks=tasks)
        startup = time.perf_counter() - started
        http = MCPEnvironment(server=f"http://127.0.0.1:{port}/mcp", tasks=tasks)
        timings = {"in process": [], "stdio": [], "http": []}
        try:
            for _ in range(args.repeats):  # interleaved: floor, stdio, HTTP, floor, ...
                timings["in process"].append(per_call(local, "calculate", args.calls))
                timings["stdio"].append(per_call(stdio, "calculate", args.calls))
                timings["http"].append(per_call(http, "calculate", args.calls))
        finally:
            stdio.close()
            http.close()
            server.terminate()
        lost = restart_cost(tasks, args.crash_after, args.restarts)
    medians = {name: statistics.median(values) for name, values in timings.items()}
    floor = medians["in process"]
    print(
        f"in process (floor): {floor * 1e6:.0f} us/call; MCP over stdio: {medians['stdio'] * 1e3:.2f} ms/call "
        f"({medians['stdio'] / floor:.0f}x); MCP over HTTP: {medians['http'] * 1e3:.2f} ms/call "
        f"({medians['http'] / floor:.0f}x); stdio server start and tool list: {startup:.2f} s "
        f"({args.calls} calls x {args.repeats} repeats, interleaved, medians)"
    )
    print(
        f"a server dying every {args.crash_after} calls: a plain call {lost['plain_ms']:.2f} ms, the call that "
        f"restarts it {lost['restart_s']:.2f} s ({lost['restarts']} restarts); once its {args.restarts} restarts "
        f"were spent, ToolServerLost after {lost['lost_s']:.2f} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"medians_s": medians, "startup_s": startup, "killed": lost}, indent=2))


if __name__ == "__main__":
    main()
