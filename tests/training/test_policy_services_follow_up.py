"""A behaviour-cloning run's follow-up rollouts play the environment the policy was trained in."""

import pytest

from tests.factories import CampaignFactory, UserFactory
from tests.rewardmodel.rm_fixtures import tiny_policy
from training.policy.services import policy_rollouts_launch

pytestmark = pytest.mark.django_db


def test_the_follow_up_rollout_uses_the_policys_environment():
    policy = tiny_policy()
    policy.metadata = {**(policy.metadata or {}), "environment": "arithmetic"}
    policy.save()
    run = policy_rollouts_launch(
        policy=policy,
        campaign=CampaignFactory(),
        tasks=2,
        samples=2,
        user=UserFactory(roles=["admin"]),
        idempotency_key="k",
    )
    assert run.config["environment"] == "arithmetic"
    given = policy_rollouts_launch(
        policy=policy,
        campaign=CampaignFactory(),
        tasks=2,
        samples=2,
        user=UserFactory(roles=["admin"]),
        idempotency_key="k2",
        environment="encyclopedia",
    )
    assert given.config["environment"] == "encyclopedia"
