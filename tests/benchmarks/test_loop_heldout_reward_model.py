"""loop_heldout's reward-model block: best-of-n and the answer swap overall and per habit
situation (how often its favourite is right where each habit's mistakes are)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.policy_fixtures import tiny_policy_dir
from tests.rewardmodel.rm_fixtures import tiny_reward_model_dir
from training.envs.encyclopedia.habits import OTHER, SITUATIONS

ROOT = Path(__file__).resolve().parents[2]


def test_loop_heldout_says_per_situation_how_often_the_reward_models_favourite_is_right(tmp_path):
    policy, ranker = tiny_policy_dir(tmp_path / "policy"), tiny_reward_model_dir(tmp_path / "rm")
    report = tmp_path / "report.json"
    args = ["--policy", f"start={policy}", "--reward-model", ranker, "--worlds", "10001", "--tasks", "12"]
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/loop_heldout.py",
            *args,
            "--temperatures",
            "--best-of",
            "2",
            "--json",
            str(report),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    world = json.loads(report.read_text())["10001"]
    best, one = world["best_of_n"], world["best_of_n"]["one_sample_situations"]
    assert (best["n"], best["tasks"]) == (2, 12)
    # 12 tasks across kinds hold habits' situations and others; each has its favourite's share, one
    # sample's share and the paired gain, and the tasks add up.
    assert {"headquarters_first_page", "other"} <= set(best["situations"]) == set(one) <= {*SITUATIONS, OTHER}
    assert sum(cell["n"] for cell in best["situations"].values()) == 12
    for name, cell in best["situations"].items():
        assert cell["gain"][0] == pytest.approx(cell["success"][0] - one[name][0])
    swap = world["reward_model"]["answer_swap"]
    assert set(swap["by_situation"]) <= set(best["situations"])
    assert sum(cell["n"] for cell in swap["by_situation"].values()) == swap["n"]
    assert "per situation: how often its favourite of 2 is right" in done.stdout
