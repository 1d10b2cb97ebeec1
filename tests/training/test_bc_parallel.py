"""Behaviour cloning in two data-parallel CPU processes (gloo) follows the one-process loss curve
at the same batch size and leaves no process behind when cancelled."""

import pytest
import torch

from tests.helpers import processes_with_env
from training.envs.arithmetic import ArithmeticEnvironment
from training.policy.bc import BCConfig, demonstration_texts, demonstrations, play_demonstrations, train_bc
from training.policy.chat import ChatFormat
from training.policy.model_io import build_model, train_tokenizer

TINY = dict(hidden=48, layers=2, heads=2)


@pytest.fixture(scope="module")
def world():
    env = ArithmeticEnvironment(seed=11, n_tasks=24)
    config = BCConfig(
        environment="arithmetic",
        vocab_size=400,
        max_steps=6,
        extra_worlds=0,
        batch_size=8,
        learning_rate=3e-3,
        warmup_steps=2,
        **TINY,
    )
    played = play_demonstrations(env, config, parser="compact")[:33]  # a last batch of 1: one rank gets none
    tokenizer = train_tokenizer(demonstration_texts(played), vocab_size=config.vocab_size)
    examples = demonstrations(ChatFormat.for_policy(tokenizer, parser="compact"), played)
    return config, tokenizer, examples


def _train(world, processes: int, **overrides):
    config, tokenizer, examples = world
    points = []
    model = build_model(tokenizer, seed=3, **TINY)
    config = BCConfig(**{**config.__dict__, "processes": processes, **overrides})
    result = train_bc(model, tokenizer, examples, config, metrics=lambda step, values: points.append(values))
    return model, result, points


def test_two_gloo_processes_follow_the_one_process_loss_curve(world):
    one, one_result, _ = _train(world, 1)
    two, two_result, points = _train(world, 2)
    assert one_result["steps"] == two_result["steps"] == 6
    assert points, "rank 0's metrics reached the parent"
    # The same batches, split between the ranks, with the loss normalised over the whole batch
    # and the gradients averaged: the end loss and the weights agree to float rounding.
    assert two_result["loss/total"] == pytest.approx(one_result["loss/total"], abs=1e-4)
    for a, b in zip(one.parameters(), two.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-4)


def test_a_cancelled_parallel_run_stops_and_leaves_no_process(world, tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    config, tokenizer, examples = world
    points = []
    model = build_model(tokenizer, seed=3, **TINY)
    stopped = train_bc(
        model,
        tokenizer,
        examples,
        BCConfig(**{**config.__dict__, "processes": 2, "max_steps": 100_000}),
        metrics=lambda step, values: points.append(step),
        should_stop=lambda: bool(points),  # once the ranks have trained a step
    )
    assert 0 < stopped["steps"] < 100_000
    assert not any(processes_with_env("ARBITER_PARALLEL_DIR", str(p)) for p in tmp_path.iterdir())
