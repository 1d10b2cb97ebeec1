"""The pure pieces of PPO on hand-computed cases (no database, no model)."""

import math

import pytest
import torch

from training.rl.ppo_math import (
    explained_variance,
    gae,
    kl_penalty_rewards,
    last_agent_index,
    loss_count,
    masked_mean,
    masked_whiten,
    policy_loss,
    token_weights,
    value_loss,
)

# One row: question (0), action (1, 1), observation (0, 0), action (1), padding (0).
MASK = torch.tensor([[0, 1, 1, 0, 0, 1, 0]], dtype=torch.float)


def test_gae_counts_only_agent_tokens_as_steps():
    rewards = torch.tensor([[9.0, 0.0, 0.0, 9.0, 9.0, 1.0, 9.0]])  # rewards off the mask are ignored
    values = torch.tensor([[5.0, 0.5, 0.6, 5.0, 5.0, 0.7, 5.0]])
    advantages, returns = gae(rewards, values, MASK, gamma=0.9, lam=0.5)
    # Backwards over the agent tokens 5, 2, 1:
    d5 = 1.0 + 0.9 * 0.0 - 0.7  # the last step: no next value
    d2 = 0.0 + 0.9 * 0.7 - 0.6  # the next state of token 2 is token 5, past the observation
    d1 = 0.0 + 0.9 * 0.6 - 0.5
    a5 = d5
    a2 = d2 + 0.9 * 0.5 * a5
    a1 = d1 + 0.9 * 0.5 * a2
    expected = torch.tensor([[0.0, a1, a2, 0.0, 0.0, a5, 0.0]])
    assert torch.allclose(advantages, expected, atol=1e-6)
    assert torch.allclose(returns, (expected + values) * MASK, atol=1e-6)


def test_gae_with_gamma_and_lambda_one_is_the_reward_to_go_minus_the_value():
    rewards = torch.tensor([[0.0, 1.0, 2.0, 0.0, 0.0, 3.0, 0.0]])
    values = torch.tensor([[0.0, 0.5, 0.25, 0.0, 0.0, 1.0, 0.0]])
    advantages, returns = gae(rewards, values, MASK, gamma=1.0, lam=1.0)
    assert returns[0, 1] == 6.0 and returns[0, 2] == 5.0 and returns[0, 5] == 3.0
    assert advantages[0, 1] == 5.5


def _gae_one_row_at_a_time(rewards, values, mask, gamma, lam):
    """GAE written as its definition reads: per row, backwards over that row's agent tokens."""
    advantages = torch.zeros_like(rewards)
    for row in range(rewards.shape[0]):
        running, next_value = 0.0, 0.0
        for t in reversed([t for t in range(rewards.shape[1]) if mask[row, t]]):
            running = rewards[row, t] + gamma * next_value - values[row, t] + gamma * lam * running
            advantages[row, t] = running
            next_value = values[row, t]
    return advantages


@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.9, 0.5), (1.0, 1.0), (0.99, 0.0)])
def test_gae_over_a_batch_equals_it_row_by_row_whatever_the_holes_in_the_mask(gamma, lam):
    generator = torch.Generator().manual_seed(7)
    rewards, values = torch.randn(9, 40, generator=generator), torch.randn(9, 40, generator=generator)
    mask = (torch.rand(9, 40, generator=generator) < 0.6).float()
    mask[3] = 0  # a row with no agent token
    mask[4, :] = 1  # a row of agent tokens only
    advantages, returns = gae(rewards, values, mask, gamma=gamma, lam=lam)
    expected = _gae_one_row_at_a_time(rewards, values, mask, gamma, lam)
    assert torch.allclose(advantages, expected, atol=1e-5)
    assert torch.allclose(returns, (expected + values) * mask, atol=1e-5)
    assert not advantages[3].any() and not advantages[mask == 0].any()


def test_masked_whitening_uses_only_agent_tokens():
    values = torch.tensor([[100.0, 1.0, 2.0, -50.0, 7.0, 3.0, 0.0]])
    whitened = masked_whiten(values, MASK)
    kept = whitened[MASK.bool()]
    assert abs(float(kept.mean())) < 1e-6
    assert math.isclose(float(kept.var(unbiased=True)), 1.0, rel_tol=1e-4)
    assert whitened[0, 0] == whitened[0, 3] == whitened[0, 4] == 0
    assert float(masked_mean(values, MASK)) == 2.0


def test_kl_penalty_and_score_at_the_last_agent_token():
    logp = torch.tensor([[0.0, -1.0, -2.0, 0.0, 0.0, -0.5, 0.0], [0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    ref = torch.tensor([[0.0, -1.5, -1.0, -9.0, 0.0, -0.5, 0.0], [0.0, -2.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    mask = torch.cat([MASK, torch.tensor([[0, 1, 0, 0, 0, 0, 0]], dtype=torch.float)])
    rewards, kl = kl_penalty_rewards(torch.tensor([2.0, -1.0]), logp, ref, mask, kl_coef=0.1)
    assert torch.allclose(kl[0], torch.tensor([0.0, 0.5, -1.0, 0.0, 0.0, 0.0, 0.0]))  # token 3 is not the agent's
    assert torch.allclose(rewards[0], torch.tensor([0.0, -0.05, 0.1, 0.0, 0.0, 2.0, 0.0]))
    assert torch.allclose(rewards[1], torch.tensor([0.0, -0.1 - 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]))
    assert last_agent_index(torch.zeros(1, 4)).item() == -1


def test_clipped_policy_loss_on_hand_computed_ratios():
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    old = torch.zeros(1, 3)
    new = torch.tensor([[math.log(1.5), math.log(0.5), 5.0]])  # ratios 1.5 and 0.5; the third is off the mask
    advantages = torch.tensor([[1.0, 1.0, 100.0]])
    loss, stats = policy_loss(new, old, advantages, mask, clip=0.2)
    # Token 1: max(-1.5, -1.2) = -1.2 (clipped); token 2: max(-0.5, -0.8) = -0.5.
    assert math.isclose(float(loss), (-1.2 - 0.5) / 2, rel_tol=1e-6)
    assert stats["policy/clipfrac"] == 0.5


def test_clipped_value_loss():
    mask = torch.tensor([[1.0, 1.0]])
    loss, stats = value_loss(
        torch.tensor([[1.0, 0.1]]), torch.tensor([[0.0, 0.0]]), torch.tensor([[1.0, 1.0]]), mask, clip=0.2
    )
    # Token 1: unclipped 0, clipped (0.2 - 1)^2 = 0.64; token 2: 0.81 both ways.
    assert math.isclose(float(loss), 0.5 * (0.64 + 0.81) / 2, rel_tol=1e-6)
    assert stats["value/clipfrac"] == 0.5


def test_no_gradient_reaches_environment_tokens():
    logits = torch.randn(1, 7, requires_grad=True)
    loss, _ = policy_loss(logits, logits.detach(), torch.ones(1, 7), MASK)
    loss.backward()
    assert torch.all(logits.grad[~MASK.bool()] == 0) and torch.all(logits.grad[MASK.bool()] != 0)


def test_explained_variance():
    returns = torch.tensor([[0.0, 1.0, 2.0, 0.0, 0.0, 3.0, 0.0]])
    assert explained_variance(returns, returns, MASK) == pytest.approx(1.0)
    assert explained_variance(torch.zeros_like(returns) + 2.0, returns, MASK) == pytest.approx(0.0)


def test_each_episode_weighs_the_same_however_long_it_is():
    # A 1-token episode and a 4-token one: with `episode`, each gets half the loss; with
    # `token`, the long one gets four fifths.
    mask = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    values = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    by_episode = masked_mean(values, token_weights(mask, "episode"), count=loss_count(mask, "episode"))
    by_token = masked_mean(values, token_weights(mask, "token"), count=loss_count(mask, "token"))
    assert float(by_episode) == pytest.approx(0.5) and float(by_token) == pytest.approx(0.2)
    assert float(loss_count(torch.tensor([[1.0, 1.0], [0.0, 0.0]]), "episode")) == 1.0  # a row with no action
    with pytest.raises(ValueError):
        token_weights(mask, "sequence")
