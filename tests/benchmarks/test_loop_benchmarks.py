"""The loop's benchmark scripts at a tiny size, so they cannot rot: each runs as a user runs it
and prints its figures (the figures themselves are in benchmarks/RESULTS.md)."""
import json
import subprocess
import sys
from pathlib import Path

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
    out = _run("benchmarks/loop_heldout.py", "--policy", f"start={policy}", "--policy", f"again={policy}",
               "--worlds", "10001", "--tasks", "4", "--json", str(report))
    figures = json.loads(report.read_text())["10001"]
    assert figures["tasks"] == 4 and set(figures["policies"]) == {"start", "again"}
    # The same policy and the same seeds: no gain, and the table says so.
    assert figures["policies"]["again"]["t1"]["gain"][0] == 0.0
    assert "world 10001 (4 tasks)" in out
