"""A reward model trained in two data-parallel CPU processes (gloo) follows the one-process loss
curve at the same batch size, and a run cancelled or killed mid-way leaves no process behind."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardmodel.scoring import RewardScorer
from rewardmodel.train import RewardModelConfig, train_reward_model
from tests.conftest import wait_for
from tests.helpers import processes_with_env
from tests.rewardmodel.rm_fixtures import TINY, Recorder
from tests.rewardmodel.synthetic import bpe_tokenizer_dir, pairs

ROOT = Path(__file__).resolve().parents[2]


def _config(**overrides) -> RewardModelConfig:
    return RewardModelConfig(
        **{
            "tokenizer_dir": bpe_tokenizer_dir(),
            "batch_size": 8,
            "epochs": 1.0,
            "checkpoint_every": 0,
            "learning_rate": 1e-3,
            **TINY,
            **overrides,
        }
    )


def _losses(recorder: Recorder) -> list[float]:
    return [values["train/loss"] for _, values in recorder.metric_points if "train/loss" in values]


def test_two_gloo_processes_follow_the_one_process_loss_curve(tmp_path):
    rows = pairs(64, seed=11)  # 8 steps of 8 pairs, a loss logged at each
    alone, shared = Recorder(), Recorder()
    one = train_reward_model(rows, _config(), tmp_path / "one", callbacks=alone)
    two = train_reward_model(rows, _config(processes=2), tmp_path / "two", callbacks=shared)
    assert (one.steps, two.steps) == (8, 8) and not two.cancelled
    assert any("2 data-parallel processes" in line for line in shared.lines)
    assert shared.fractions and shared.fractions[-1] == 1.0  # rank 0's progress reached the parent
    curve_one, curve_two = _losses(alone), _losses(shared)
    assert len(curve_one) == len(curve_two) == 8
    # The same pairs in the same global batches: the curves agree to the float rounding of
    # the gradient all-reduce (measured on the 2-core VM: at most 1.2e-7 apart).
    for a, b in zip(curve_one, curve_two):
        assert b == pytest.approx(a, abs=1e-4)
    scored_one = RewardScorer(one.model_dir).score_pairs(rows[:8])
    scored_two = RewardScorer(two.model_dir).score_pairs(rows[:8])
    assert scored_two[0] == pytest.approx(scored_one[0], abs=5e-3)


def test_batch_size_must_be_shared_evenly():
    problems = _config(batch_size=9, processes=2).validate()
    assert any(p.startswith("batch_size:") and "multiple of processes" in p for p in problems)


def test_more_processes_than_the_worker_has_gpus_are_refused_before_any_starts(tmp_path, monkeypatch):
    from core import parallel

    monkeypatch.setattr("torch.cuda.device_count", lambda: 1)
    with pytest.raises(parallel.ParallelRunFailed, match="2 processes need 2 GPUs, one each, and this worker sees 1"):
        parallel.launch(
            "training.rl.rl_rank",
            {"device": "cuda"},
            tmp_path / "work",
            processes=2,
            on_event=lambda kind, args: None,
            should_stop=lambda: False,
        )
    assert not (tmp_path / "work").exists()


def _ranks_of(work: Path) -> list[int]:
    """The launcher and ranks of the run whose work folder is `work`."""
    return processes_with_env("ARBITER_PARALLEL_DIR", str(work))


def test_a_cancelled_parallel_run_stops_every_process_and_keeps_a_checkpoint(tmp_path):
    recorder = Recorder(stop_after=2)
    result = train_reward_model(
        pairs(96, seed=12), _config(processes=2, checkpoint_every=50), tmp_path, callbacks=recorder
    )
    assert result.cancelled and result.model_dir is None and 1 <= result.steps < 12
    assert recorder.saved, "a cancelled run keeps a checkpoint to resume from"
    assert _ranks_of(tmp_path / "parallel") == []


def test_a_worker_killed_mid_run_leaves_no_training_process(tmp_path):
    """The worker process (here a plain Python parent) dies by SIGKILL while its two ranks train:
    the launcher gets SIGTERM as its parent dies, and the ranks die with the launcher."""
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from rewardmodel.train import RewardModelConfig, train_reward_model
from tests.rewardmodel.synthetic import bpe_tokenizer_dir, pairs
config = RewardModelConfig(tokenizer_dir=bpe_tokenizer_dir(), batch_size=2, epochs=50.0, checkpoint_every=0,
                           hidden=32, layers=1, heads=2, max_length=128, processes=2)
train_reward_model(pairs(64, seed=13), config, Path({str(tmp_path)!r}))
"""
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env={**os.environ})
    events = tmp_path / "parallel" / "events.jsonl"
    deadline = time.monotonic() + 45
    while not (events.exists() and b'"metrics"' in events.read_bytes()):  # the ranks are training
        assert parent.poll() is None, "the parent ended before its ranks trained"
        assert time.monotonic() < deadline, "no step within 45 s"
        time.sleep(0.2)
    assert len(_ranks_of(tmp_path / "parallel")) >= 3  # the launcher and two ranks
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=10)
    wait_for(lambda: not _ranks_of(tmp_path / "parallel"), timeout=30)
