"""The cost of one tool call through an MCP server (stdio) against the same call in process.

    .venv/bin/python benchmarks/mcp_call_cost.py [--calls 300] [--repeats 3]

The tool is the arithmetic environment's calculator: in process through
`ArithmeticEnvironment`, and served by tests/training/mcp_calculator_server.py through
`MCPEnvironment`; both through the same `EpisodeRunner` (schema check, record). Prints
the median seconds per call of each and their ratio, and the server's start-up time.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from training.envs.arithmetic import ArithmeticEnvironment  # noqa: E402
from training.envs.base import EpisodeRunner, Limits  # noqa: E402
from training.envs.mcp import MCPEnvironment  # noqa: E402


def per_call(env, tool: str, calls: int) -> float:
    runner = EpisodeRunner(env, Limits(max_steps=calls + 1, loop_repeats=calls + 1))
    episode = runner.start(env.tasks("train")[0])
    started = time.perf_counter()
    for i in range(calls):
        episode.call(tool, {"expression": f"{i} * 17 - 95"})
    return (time.perf_counter() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    local = ArithmeticEnvironment(seed=0, n_tasks=20)
    with tempfile.TemporaryDirectory() as tmp:
        tasks = Path(tmp) / "tasks.jsonl"
        tasks.write_text("\n".join(json.dumps({"external_id": t.external_id, "prompt": t.prompt,
                                               "reference": t.reference, "split": t.split})
                                   for t in local.tasks("train")) + "\n")
        started = time.perf_counter()
        remote = MCPEnvironment(server=[sys.executable, str(ROOT / "tests/training/mcp_calculator_server.py")],
                                tasks=tasks)
        startup = time.perf_counter() - started
        try:
            local_s = statistics.median(per_call(local, "calculate", args.calls) for _ in range(args.repeats))
            remote_s = statistics.median(per_call(remote, "calculate_expression", args.calls)
                                         for _ in range(args.repeats))
        finally:
            remote.close()
    print(f"in process: {local_s * 1e6:.0f} us/call; MCP over stdio: {remote_s * 1e3:.2f} ms/call "
          f"({remote_s / local_s:.0f}x); server start and tool list: {startup:.2f} s "
          f"({args.calls} calls x {args.repeats} repeats, medians)")


if __name__ == "__main__":
    main()
