"""Benchmark scripts (the loop's, and the embedded app's soak) at a tiny size, so they cannot
rot: each runs as a user runs it and prints its figures (the figures themselves are in
benchmarks/RESULTS.md)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.policy_fixtures import tiny_policy_dir

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: int = 120) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_gae_speed_compares_the_scan_with_the_row_by_row_loop():
    out = _run("benchmarks/gae_speed.py", "--rows", "4", "--tokens", "16", "--repeats", "1")
    assert "vectorised" in out and "row by row" in out and "x faster" in out


def test_loop_heldout_plays_policies_on_a_world_no_training_saw(tmp_path):
    policy = tiny_policy_dir(tmp_path / "policy")
    report = tmp_path / "report.json"
    out = _run(
        "benchmarks/loop_heldout.py",
        "--policy",
        f"start={policy}",
        "--policy",
        f"again={policy}",
        "--worlds",
        "10001",
        "--tasks",
        "4",
        "--temperatures",
        "--json",
        str(report),
    )
    figures = json.loads(report.read_text())["10001"]
    assert figures["tasks"] == 4 and set(figures["policies"]) == {"start", "again"}
    # The same policy and the same seeds: no gain, and the table says so.
    assert figures["policies"]["again"]["t1"]["gain"][0] == 0.0
    assert "world 10001 (4 tasks)" in out


@pytest.mark.worker
def test_soak_embedded_runs_the_app_with_traffic_and_reports_crashes():
    out = _run("benchmarks/soak_embedded.py", "--minutes", "0.1", "--annotators", "1", "--bc-steps", "10", timeout=240)
    figures = json.loads(out.strip().splitlines()[-1])
    said = json.dumps(figures)  # every figure in a failure's message
    assert figures["crashes"] == 0 and figures["http_5xx"] == 0 and figures["unrecoverable_in_logs"] == 0, said
    assert figures["workers_alive"] == {"default": 1, "gpu": 1}, said
    assert figures["labels"] >= 1 and figures["imports"] == {"201": 1}, said
    assert any(name.startswith("bc#") for name in figures["runs"]) and figures["peak_rss_mb"] > 0, said


def test_import_traces_reads_each_format_as_one_json_document():
    out = _run("benchmarks/import_traces.py", "--document", "--sizes", "16", "--repeats", "1", timeout=240)
    rows = [line for line in out.splitlines() if line.startswith("| 16 |")]
    assert [row.split("|")[2].strip() for row in rows] == ["openai", "otel", "openinference", "langsmith", "langfuse"]


def test_mcp_call_cost_measures_stdio_http_and_a_killed_server():
    out = _run("benchmarks/mcp_call_cost.py", "--calls", "5", "--repeats", "1", "--crash-after", "3", "--restarts", "1")
    assert "MCP over stdio" in out and "MCP over HTTP" in out and "interleaved" in out
    assert "(1 restarts)" in out and "ToolServerLost after" in out


def test_serve_best_of_plays_held_out_tasks_through_the_openai_client(tmp_path):
    from tests.rewardmodel.rm_fixtures import tiny_reward_model_dir

    policy = tiny_policy_dir(tmp_path / "policy")
    ranker = tiny_reward_model_dir(tmp_path / "rm")
    report = tmp_path / "report.json"
    out = _run(
        "benchmarks/serve_best_of.py",
        str(policy),
        ranker,
        "--tasks",
        "3",
        "--best-of",
        "1",
        "2",
        "--max-tokens",
        "16",
        "--json",
        str(report),
    )
    rows = json.loads(report.read_text())["rows"]
    assert [r["best_of"] for r in rows] == [1, 2] and all(r["episodes"] == 3 for r in rows)
    assert rows[0]["gain"] == 0.0 and "best_of 2:" in out
