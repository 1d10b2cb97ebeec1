"""An RL run says which step of which iteration it is in as that step begins, and its progress
never goes backwards (issue 53: "Judging the start ..." stayed up through four minutes of
iteration 1, and "0.0% Starting ..." through the first evaluation)."""

from __future__ import annotations

import pytest

from core.callbacks import RLCallbacks
from tests.policy_fixtures import tiny_policy_dir
from tests.training.ppo_fixtures import FAST, World, token_share_scorer
from training.envs.registry import get_environment
from training.rl.config import RLConfig
from training.rl.trainer import train_rl


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    return tiny_policy_dir(tmp_path_factory.mktemp("phases") / "policy")


def test_each_step_of_an_iteration_is_announced_as_it_begins_and_progress_only_grows(tiny_policy, tmp_path):
    world = World(get_environment("encyclopedia"))
    events = []
    config = RLConfig(iterations=2, **{**FAST, "eval_every": 1, "eval_samples": 1})
    train_rl(
        policy_dir=tiny_policy,
        scorer=token_share_scorer(200),
        train_tasks=world.split("train"),
        dev_tasks=world.split("dev", 2),
        runner=world.runner,
        out_dir=tmp_path,
        config=config,
        callbacks=RLCallbacks(
            log=lambda m: events.append(("log", None, m)),
            progress=lambda f, m="": events.append(("progress", f, m)),
        ),
    )
    said = [m for kind, _, m in events if kind == "progress"]
    for iteration in (1, 2):
        playing = said.index(f"Iteration {iteration} of 2: playing 8 episodes ...")
        updating = said.index(f"Iteration {iteration} of 2: updating the policy (2 epochs) ...")
        judging = next(i for i, m in enumerate(said) if m.startswith(f"Judging iteration {iteration} on 2 dev tasks"))
        saving = said.index(f"Saving the checkpoint of iteration {iteration} ...")
        assert playing < updating < judging < saving, said
    # Iteration 1 begins after the start was judged: its message replaces "Judging the start".
    start = next(i for i, m in enumerate(said) if m.startswith("Judging the start"))
    assert start < said.index("Iteration 1 of 2: playing 8 episodes ...")
    fractions = [f for kind, f, _ in events if kind == "progress"]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0, fractions
