"""Does RL learn what it is paid for? The known-optimum environment (training/envs/codeword.py)
and RL against its rubric from a behaviour-cloned start (training/rl/sanity.py), on held-out
tasks with the last checkpoint; and the same check failing when the advantage's sign is flipped."""

from __future__ import annotations

from dataclasses import replace

import pytest

from training.envs.base import EpisodeRunner
from training.envs.codeword import CodewordEnvironment
from training.policy.episodes import play_scripted
from training.policy.parsers import PARSERS
from training.rl.sanity import SanityConfig, bc_start, held_out_success, rl_config, rl_run

# The check's budget in the suite: 12 iterations of 48 episodes (benchmarks/rl_sanity.py runs 30),
# judged on 120 held-out tasks.
CONFIG = replace(SanityConfig(), iterations=12, eval_tasks=120)


def scripted_success(env, turns, split="eval") -> float:
    runner = EpisodeRunner(env)
    writer = PARSERS["compact"](list(runner.tools.values()))
    episodes = [play_scripted(runner, task, turns, writer) for task in env.tasks(split)]
    return sum(e.outcome.correct for e in episodes) / len(episodes)


def test_the_codeword_optimum_is_known_and_the_demonstrator_is_well_below_it():
    env = CodewordEnvironment()

    def optimal(task, state):
        yield "look", {"box": task.metadata["asked"]}
        yield "answer", {"text": task.metadata["boxes"][task.metadata["asked"]]}

    assert scripted_success(env, optimal) == 1.0
    demonstrated = scripted_success(env, env.demonstrator(seed=0), split="train")
    assert 0.45 < demonstrated < 0.65  # right box and read 40%, plus lucky guesses and equal words
    assert {t.split for t in env.tasks("train")} == {"train"}
    assert not {t.external_id for t in env.tasks("train")} & {t.external_id for t in env.tasks("eval")}


def test_a_box_that_does_not_exist_is_an_error_that_uses_a_step():
    env = CodewordEnvironment()
    episode = EpisodeRunner(env).start(env.tasks("train")[0])
    result = episode.call("look", {"box": "purple"})
    assert result.error and "is not one of" in result.content
    assert episode.record.tool_errors == 1


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    path = bc_start(tmp_path_factory.mktemp("sanity") / "start", CONFIG)
    return path, held_out_success(path, CONFIG)


@pytest.mark.parametrize("algorithm", ["ppo", "rloo", "grpo"])
def test_rl_against_the_rubric_raises_held_out_success_toward_the_optimum(start, algorithm, tmp_path):
    path, before = start
    assert before["greedy"] >= 0.9 and before["t1"] <= 0.75  # a start that reads, with room at T=1
    after = rl_run(path, tmp_path / algorithm, rl_config(algorithm, CONFIG), CONFIG)
    # GRPO can end at the KL budget: one derailed episode's hundreds of tokens dominate the batch's KL.
    assert after["stop_reason"] in ("finished", "kl_budget"), after
    assert after["batch_success_last"] >= after["batch_success_first"] + 0.15, after
    assert after["held_out"]["t1"] >= before["t1"] + 0.1, (before, after)
    assert after["held_out"]["greedy"] >= before["greedy"] - 0.05, (before, after)


def test_the_check_fails_when_the_advantage_has_the_wrong_sign(start, tmp_path, monkeypatch):
    import training.rl.trainer as trainer

    right = trainer.policy_loss  # the name the trainer calls (it imports policy_loss from ppo_math)
    monkeypatch.setattr(
        trainer, "policy_loss", lambda logprobs, old, advantages, *a, **k: right(logprobs, old, -advantages, *a, **k)
    )
    path, before = start
    # Six iterations: a flipped advantage drives the policy to 0% within a few (benchmarks/rl_sanity.py).
    fewer = replace(CONFIG, iterations=6)
    after = rl_run(path, tmp_path / "flipped", rl_config("ppo", fewer), fewer)
    assert after["held_out"]["t1"] < before["t1"] + 0.1, (before, after)
