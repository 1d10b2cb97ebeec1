"""RL in two data-parallel CPU processes (gloo): each plays, scores and trains on its share of
every batch, and the run takes the steps one process takes on the whole batch."""

import math
from dataclasses import replace

import pytest
import torch

from core.callbacks import RLCallbacks
from tests.helpers import processes_with_env
from tests.policy_fixtures import tiny_policy_dir
from tests.training.ppo_fixtures import encyclopedia_inputs
from training.policy.model_io import load_policy
from training.rl.config import RLConfig
from training.rl.trainer import train_rl, train_rl_in_processes

CONFIG = RLConfig(
    iterations=2,
    episodes_per_iteration=8,
    minibatch_size=4,
    epochs=2,
    rollout_batch_size=8,
    eval_every=2,
    eval_samples=1,
    learning_rate=1e-2,
    kl_coef=0.02,
    tool_error_penalty=0.0,
    seed=0,
)
INPUTS = {"below": 200, "dev": 6}


class Seen:
    """Metrics and policies saved, as a run's callbacks receive them."""

    def __init__(self):
        self.metrics, self.saved = {}, []

    def callbacks(self) -> RLCallbacks:
        return RLCallbacks(
            metrics=lambda step, values: self.metrics.setdefault(step, {}).update(values),
            policy_saved=lambda iteration, path, dev: self.saved.append((iteration, path, dev)),
        )


def test_two_gloo_processes_take_the_one_process_steps(tmp_path):
    policy_dir = tiny_policy_dir(tmp_path / "policy")
    one, two = Seen(), Seen()
    single = train_rl(
        policy_dir=policy_dir,
        config=CONFIG,
        out_dir=tmp_path / "one",
        callbacks=one.callbacks(),
        **encyclopedia_inputs(**INPUTS),
    )
    double = train_rl_in_processes(
        inputs="tests.training.ppo_fixtures:encyclopedia_inputs",
        arguments=INPUTS,
        policy_dir=policy_dir,
        config=replace(CONFIG, processes=2),
        out_dir=tmp_path / "two",
        callbacks=two.callbacks(),
    )
    assert single.stop_reason == double.stop_reason == "finished" and double.iterations == 2
    # The first batch is played by the same weights with the same seeds, split between the
    # processes: the same episodes, scores and whole-batch figures.
    for name in ("objective/rm_score", "objective/kl", "episode/steps", "objective/entropy"):
        assert two.metrics[1][name] == pytest.approx(one.metrics[1][name], rel=1e-4, abs=1e-6), name
    # Each minibatch's loss is the sum of the processes' parts; the gradients are summed before
    # each step, so the second iteration and the weights follow the one process's to rounding.
    for step in (1, 2):
        for name in ("loss/policy", "loss/value", "policy/grad_norm", "policy/clipfrac"):
            assert two.metrics[step][name] == pytest.approx(one.metrics[step][name], rel=2e-3, abs=1e-5), (step, name)
    assert [e["dev"]["episodes"] for e in double.evaluations] == [6, 6]  # the dev tasks, shared and gathered
    assert [e["dev"]["success"] for e in double.evaluations] == [e["dev"]["success"] for e in single.evaluations]
    assert [(i, d["episodes"]) for i, _, d in two.saved] == [(0, 6), (2, 6)]  # the policies saved reached the parent
    a, _ = load_policy(single.last_checkpoint)
    b, _ = load_policy(double.last_checkpoint)
    for x, y in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(y, x, rtol=1e-3, atol=1e-4)
    assert not processes_with_env("ARBITER_PARALLEL_DIR", str(tmp_path / "two" / "parallel"))


def test_processes_must_each_have_a_task_of_every_batch():
    assert RLConfig(processes=2, episodes_per_iteration=8, minibatch_size=4).validate() == []
    grpo = RLConfig(algorithm="grpo", group_size=4, episodes_per_iteration=4, minibatch_size=4, processes=2)
    assert any(p.startswith("processes:") for p in grpo.validate())
    assert any(p.startswith("processes:") for p in RLConfig(processes=0).validate())


def test_a_cancelled_parallel_rl_run_stops_both_processes_and_leaves_none(tmp_path):
    """Minibatches of one episode: in each, one process has no row and joins the sums with zeros."""
    policy_dir = tiny_policy_dir(tmp_path / "policy")
    seen = Seen()
    callbacks = seen.callbacks()
    callbacks.should_stop = lambda: bool(seen.metrics)  # once the processes have trained an iteration
    result = train_rl_in_processes(
        inputs="tests.training.ppo_fixtures:encyclopedia_inputs",
        arguments=INPUTS,
        policy_dir=policy_dir,
        config=replace(CONFIG, processes=2, iterations=1000, eval_every=0, minibatch_size=1),
        out_dir=tmp_path / "run",
        callbacks=callbacks,
    )
    assert result.stop_reason == "cancelled" and 1 <= result.iterations < 1000
    assert all(math.isfinite(seen.metrics[1][name]) for name in ("loss/policy", "loss/value", "policy/grad_norm"))
    assert not processes_with_env("ARBITER_PARALLEL_DIR", str(tmp_path / "run" / "parallel"))
