"""Rollout limits have one owner (training/policy/limits.py): every config that plays episodes
refuses the same out-of-range values with the same words (PPO, RLOO and GRPO used to accept
max_action_tokens=100000 that rollouts refused)."""

import pytest

from core.configs import config_from_input
from training.policy.limits import MAX_ACTION_TOKENS, MAX_CONTEXT
from webapp.runs.kinds import get_kind

KINDS = ("rollout", "best_of_n", "evaluation", "ppo", "rloo", "grpo")


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_that_plays_episodes_refuses_the_same_limits(kind):
    config_class = get_kind(kind).config_class
    assert config_class().max_action_tokens == MAX_ACTION_TOKENS and config_class().max_context == MAX_CONTEXT
    for values, said in (
        ({"max_action_tokens": 100_000}, "max_action_tokens: between 1 and 8,192; got 100,000."),
        ({"max_context": 10**7}, "max_context: between 16 and 262,144; got 10,000,000."),
        ({"max_action_tokens": 0}, "max_action_tokens: between 1 and 8,192; got 0."),
    ):
        with pytest.raises(ValueError) as caught:
            config_from_input(config_class, values)
        assert said in str(caught.value), (kind, str(caught.value))


def test_the_loop_and_the_rollout_command_use_the_same_limits():
    from training.pipeline import PipelineConfig, pipeline_problems

    assert PipelineConfig().max_action_tokens == MAX_ACTION_TOKENS
    assert "max_action_tokens: between 1 and 8,192; got 100,000." in pipeline_problems(
        PipelineConfig(max_action_tokens=100_000, environment="nope")
    )
