"""Worlds that never repeat (training/envs/worlds.py): each index a new world, far from every
seed training or evaluation uses, its tasks played in their own world; RL takes one per iteration."""

from __future__ import annotations

import pytest

from tests.policy_fixtures import tiny_policy_dir
from tests.training.ppo_fixtures import token_share_scorer
from training.envs.base import TRAINING_SEEDS, EpisodeRunner
from training.envs.encyclopedia.environment import UNSEEN_SEEDS_FROM
from training.envs.registry import get_environment
from training.envs.worlds import STREAM_SEEDS_FROM, WorldStream, stream_seed
from training.rl.config import RLConfig
from training.rl.trainer import train_rl


def test_stream_seeds_are_neither_training_nor_evaluation_seeds_and_streams_do_not_share_one():
    seeds = {stream_seed(s, i) for s in range(3) for i in range(50)}
    assert len(seeds) == 150
    assert min(seeds) >= STREAM_SEEDS_FROM > UNSEEN_SEEDS_FROM > TRAINING_SEEDS.stop
    with pytest.raises(ValueError):
        stream_seed(0, -1)


def test_each_index_is_a_new_world_whose_tasks_play_in_it():
    stream = WorldStream(lambda seed: get_environment("encyclopedia", seed=seed), stream=1)
    first, second = stream.tasks(1), stream.tasks(2)
    assert stream.seen == [stream_seed(1, 1), stream_seed(1, 2)]
    assert not {t.external_id for t in first} & {t.external_id for t in second}
    assert not {t.reference for t in first} <= {t.reference for t in get_environment("encyclopedia").tasks("train")}
    task = second[0]
    assert stream.runner(task).env.seed == stream_seed(1, 2)
    assert stream.tasks(2) is second  # built once
    stream.tasks(3)
    stream.tasks(4)  # only the latest two worlds are held
    with pytest.raises(KeyError, match="no world"):
        stream.runner(first[0])


def test_rl_takes_each_iterations_tasks_from_its_own_world(tmp_path):
    policy = tiny_policy_dir(tmp_path / "policy")
    stream = WorldStream(lambda seed: get_environment("encyclopedia", seed=seed))
    played: list[str] = []

    def scorer(episodes):
        played.extend(e.task.external_id for e in episodes)
        return token_share_scorer(200)(episodes)

    env = get_environment("encyclopedia")
    train_rl(
        policy_dir=policy,
        scorer=scorer,
        train_tasks=stream.tasks,
        dev_tasks=env.tasks("dev")[:2],
        runner=stream.runner,
        dev_runner=EpisodeRunner(env),
        config=RLConfig(
            iterations=2,
            episodes_per_iteration=4,
            minibatch_size=4,
            epochs=1,
            eval_every=0,
            rollout_batch_size=4,
            max_action_tokens=8,
            tool_error_penalty=0.0,
        ),
        out_dir=tmp_path / "rl",
    )
    assert stream.seen == [stream_seed(0, 1), stream_seed(0, 2)]
    worlds = [external_id.split("-")[1] for external_id in played]
    assert worlds == [str(stream_seed(0, 1))] * 4 + [str(stream_seed(0, 2))] * 4
