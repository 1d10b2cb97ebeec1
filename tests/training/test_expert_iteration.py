"""Expert iteration (training/rl/expert_iteration.py): which sample of a task is kept, that it
fine-tunes on the sampled ids and learns in the known-optimum environment from fresh worlds,
and that it stops, checkpoints and resumes by round."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from core.callbacks import RLCallbacks
from training.envs.base import EpisodeRunner
from training.envs.registry import get_environment
from training.envs.worlds import WorldStream, stream_seed
from training.rl.config import ExpertIterationConfig
from training.rl.expert_iteration import expert_iteration, favourites
from training.rl.sanity import SanityConfig, bc_start, held_out_success


def episode(correct: bool, steps: int, answer: str):
    return SimpleNamespace(
        outcome=SimpleNamespace(correct=correct, parts={"steps": steps}),
        episode=SimpleNamespace(record=SimpleNamespace(answer=answer)),
    )


def test_the_rubric_keeps_the_shortest_right_sample_and_nothing_when_none_is_right():
    a, b, c, d = episode(False, 2, "x"), episode(True, 5, "y"), episode(True, 3, "y"), episode(False, 1, "z")
    wrong = [episode(False, 2, "x")] * 4
    assert favourites([a, b, c, d] + wrong, 4, "rubric", None) == [c]


def test_the_reward_model_keeps_its_favourites_and_of_them_the_top_share():
    first = [episode(False, 2, "x"), episode(True, 5, "y"), episode(True, 3, "y"), episode(False, 1, "z")]
    second = [episode(False, 2, "x"), episode(True, 5, "y")]
    scores = [0.1, 0.2, 0.9, 0.5, -3.0, -2.0]
    assert favourites(first + second, 4, "reward_model", scores) == [first[2], second[1]]
    assert favourites(first + second, 4, "reward_model", scores, keep_top=0.5) == [first[2]]


def test_majority_keeps_the_best_scored_sample_of_the_commonest_answer():
    group = [
        episode(False, 2, "Paris"),
        episode(True, 5, "Lyon"),
        episode(True, 3, " lyon "),
        episode(False, 1, "Nice"),
    ]
    # "lyon" is the answer two samples gave: the higher-scored of those two, not the overall favourite
    assert favourites(group, 4, "majority", [0.1, 0.2, 0.3, 0.9]) == [group[2]]


def test_invalid_settings_are_refused():
    problems = ExpertIterationConfig(rounds=0, selection="vibes", temperature=0, keep_top=0).validate()
    assert any(p.startswith("keep_top") for p in problems)
    assert any(p.startswith("rounds") for p in problems)
    assert any(p.startswith("selection") for p in problems)
    assert any(p.startswith("temperature") for p in problems)
    assert "samples: at most 64." in ExpertIterationConfig(samples=65).validate()


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    config = SanityConfig(eval_tasks=120)
    path = bc_start(tmp_path_factory.mktemp("exit") / "start", config)
    return path, config


def test_distilling_right_samples_of_fresh_worlds_raises_held_out_success_at_t1(start, tmp_path):
    path, sanity = start
    before = held_out_success(path, sanity)
    stream = WorldStream(lambda seed: get_environment("codeword", seed=seed, n_tasks=200))
    dev_env = get_environment("codeword", seed=7, n_tasks=100)
    logged: list[str] = []
    saved: list[int] = []
    config = ExpertIterationConfig(
        rounds=3, tasks_per_round=128, samples=4, selection="rubric", learning_rate=3e-4, eval_samples=1
    )
    result = expert_iteration(
        policy_dir=path,
        tasks_for_round=stream.tasks,
        runner=stream.runner,
        dev_tasks=dev_env.tasks("dev"),
        dev_runner=EpisodeRunner(dev_env),
        config=config,
        out_dir=tmp_path / "exit",
        callbacks=RLCallbacks(log=logged.append, policy_saved=lambda r, p, d: saved.append(r)),
    )
    assert result.stop_reason == "finished" and saved == [0, 1, 2, 3]
    assert stream.seen == [stream_seed(0, r) for r in (1, 2, 3)]  # a world of its own each round
    assert any("kept" in line and "100.0% right" in line for line in logged), logged
    after = held_out_success(result.last_checkpoint, sanity)
    assert after["t1"] >= before["t1"] + 0.1, (before, after)
    assert after["greedy"] >= before["greedy"] - 0.05, (before, after)


def test_a_cancelled_run_resumes_after_its_last_round(start, tmp_path):
    path, _ = start
    env = get_environment("codeword", n_tasks=100)
    runner = EpisodeRunner(env)
    config = ExpertIterationConfig(rounds=2, tasks_per_round=8, samples=2, selection="rubric", eval_samples=1)
    common = dict(
        tasks_for_round=lambda r: env.tasks("train"),
        runner=runner,
        dev_tasks=env.tasks("dev")[:4],
        dev_runner=runner,
        out_dir=tmp_path / "exit",
    )
    rounds_done: list[int] = []
    stop_after_first = RLCallbacks(
        policy_saved=lambda r, p, d: rounds_done.append(r), should_stop=lambda: len(rounds_done) >= 2
    )
    first = expert_iteration(policy_dir=path, config=config, callbacks=stop_after_first, **common)
    assert first.stop_reason == "cancelled" and first.rounds == 1
    second = expert_iteration(policy_dir=path, config=replace(config), resume_from=first.last_checkpoint, **common)
    assert second.stop_reason == "finished" and second.rounds == 2
    assert [e["round"] for e in second.evaluations] == [0, 1, 2]


def small_codeword_run(path, out_dir, *, rounds: int, callbacks: RLCallbacks):
    """Expert iteration by the rubric on codeword, 8 tasks a round and 4 dev tasks."""
    env = get_environment("codeword", n_tasks=100)
    runner = EpisodeRunner(env)
    return expert_iteration(
        policy_dir=path,
        tasks_for_round=lambda r: env.tasks("train"),
        runner=runner,
        dev_tasks=env.tasks("dev")[:4],
        dev_runner=runner,
        config=ExpertIterationConfig(rounds=rounds, tasks_per_round=8, samples=2, selection="rubric", eval_samples=1),
        out_dir=out_dir,
        callbacks=callbacks,
    )


def test_a_round_cancelled_while_it_trains_is_not_kept(start, tmp_path):
    path, _ = start
    saved: list[int] = []
    asked = {"after round 1": 0}

    def should_stop() -> bool:  # no at round 2's start, yes once it trains
        if saved[-1:] == [1]:
            asked["after round 1"] += 1
        return asked["after round 1"] > 1

    callbacks = RLCallbacks(policy_saved=lambda r, p, d: saved.append(r), should_stop=should_stop)
    result = small_codeword_run(path, tmp_path / "exit", rounds=3, callbacks=callbacks)
    assert result.stop_reason == "cancelled" and result.rounds == 1 and "during round 2" in result.message
    assert saved == [0, 1] and not (tmp_path / "exit" / "checkpoints" / "round-002").exists()


def test_a_cancel_while_a_round_is_judged_ends_the_run_with_the_rounds_before_kept(start, tmp_path):
    """The skeleton's (training/rl/checkpointed_run.py) judging honours a cancel for expert
    iteration as for RL; the round being judged is not kept."""
    path, _ = start
    saved: list[int] = []
    judging = {"round 1": False}

    def log(line: str) -> None:
        judging["round 1"] = line.startswith("Judging round 1 ")

    callbacks = RLCallbacks(
        log=log, policy_saved=lambda r, p, d: saved.append(r), should_stop=lambda: judging["round 1"]
    )
    result = small_codeword_run(path, tmp_path / "exit", rounds=2, callbacks=callbacks)
    assert result.stop_reason == "cancelled" and "while round 1 was being judged" in result.message
    assert result.rounds == 0 and saved == [0]
    kept = tmp_path / "exit" / "checkpoints" / "round-000"
    assert {"config.json", "expert_iteration_state.json", "expert_iteration_config.json"} <= {
        p.name for p in kept.iterdir()
    }
    assert not (tmp_path / "exit" / "checkpoints" / "round-001").exists()
