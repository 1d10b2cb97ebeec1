"""Where RL practises and where it is judged: the training tasks of several worlds, each played
in its own world, and a dev sample from a world no RL step trains on."""

from collections import Counter

from tests.helpers import Counter as CounterEnvironment
from training.envs.base import FRESH_WORLD_SEED, rl_world_seeds
from training.envs.services import environment_get
from training.rl.dev import dev_sample
from training.rl.services import training_tasks


def test_rl_practises_on_other_worlds_each_task_in_its_own_world():
    env = environment_get("encyclopedia")
    tasks, runner = training_tasks("encyclopedia", env, 2)
    main = env.tasks("train")
    assert tasks[: len(main)] == main and len(tasks) > len(main)
    seeds = Counter(runner(task).env.seed for task in tasks)
    assert set(seeds) == {0, *rl_world_seeds(2)} == {0, FRESH_WORLD_SEED - 2, FRESH_WORLD_SEED - 1}
    assert seeds[0] == len(main)
    for task in tasks[len(main) :: 97]:  # a task of another world is answered from that world's pages
        world = runner(task).env
        assert task.reference in {t.reference for t in world.tasks(task.split)}
    alone, only = training_tasks("encyclopedia", env, 0)
    assert alone == main and only.env is env  # one world: its runner itself


def test_the_dev_sample_of_a_fresh_world_mixes_every_split_and_question_kind():
    fresh = environment_get("encyclopedia-fresh")
    sample = dev_sample(fresh, fresh=True, size=160)
    assert len(sample) == 160 == len({t.external_id for t in sample})
    assert {t.split for t in sample} == {"train", "dev", "eval"}
    assert len({t.metadata["qtype"] for t in sample}) == 5
    assert sample == dev_sample(fresh, fresh=True, size=160)  # fixed: every evaluation plays the same tasks
    own = environment_get("encyclopedia")
    assert dev_sample(own, fresh=False, size=0) == own.tasks("dev")


class NoDevTasks(CounterEnvironment):
    """A user's environment with training tasks only."""

    def tasks(self, split):
        return super().tasks(split) if split == "train" else []


def test_an_rl_run_without_dev_tasks_to_judge_it_is_refused_before_it_is_queued(db, tmp_path):
    import pytest

    from annotate.models import Policy
    from tests.factories import UserFactory
    from tests.policy_fixtures import tiny_policy_dir
    from webapp.errors import ArbiterError
    from webapp.runs.services import run_launch

    policy = Policy.objects.create(name="tiny", version="1", model_dir=str(tiny_policy_dir(tmp_path / "p")))
    config = {
        "policy_id": policy.pk,
        "environment": "tests.training.test_rl_services:NoDevTasks",
        "reward": "rubric",
        "episodes_per_iteration": 2,
        "minibatch_size": 2,
    }
    with pytest.raises(ArbiterError, match="has no dev tasks to judge checkpoints on"):
        run_launch(kind="ppo", config=config, user=UserFactory(roles=["admin"]), enqueue=False)
    assert (
        run_launch(
            kind="ppo", config={**config, "eval_every": 0}, user=UserFactory(roles=["admin"]), enqueue=False
        ).status
        == "queued"
    )
