"""The pure pieces of multi-turn PPO, on padded (batch, tokens) tensors with an action mask.

An episode is one token sequence: question, then agent actions and environment
observations in turns. `mask` is 1 exactly on the tokens the agent produced. Everything
here counts only those: the time steps of GAE are the agent tokens in order (an
observation between two actions is not a step), rewards land on agent tokens, and every
loss is a mean over agent tokens, so environment tokens get no gradient.

Conventions follow the PPO-for-language-models code of TRL <= 0.11 and CleanRL: per-token
KL penalty k1 = log pi(a) - log pi_ref(a) with coefficient beta (WebGPT: 0.02), the
reward model's score added at the episode's last agent token, advantages whitened over
the batch's agent tokens, clipped surrogate and clipped value losses.

Data-parallel runs (core/ranks.py) hold a share of the batch in each process. The
batch statistics then take `total`, which sums a tensor over the processes (the identity in
one process), and the losses take `count`, the agent tokens of the whole minibatch: each
process's loss is its part of the minibatch's mean, and the parts' gradients add up to the
gradient of the mean one process would take.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Total = Callable[[torch.Tensor], torch.Tensor]


def _here(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def masked_mean(
    values: torch.Tensor, mask: torch.Tensor, dim: int | None = None, *, count: torch.Tensor | None = None
) -> torch.Tensor:
    """The mean over the masked entries, or their sum over `count` (the whole minibatch's entries)."""
    mask = mask.to(values.dtype)
    if dim is None:
        return (values * mask).sum() / (mask.sum() if count is None else count).clamp(min=1)
    return (values * mask).sum(dim) / mask.sum(dim).clamp(min=1)


def _mean_and_var(values: torch.Tensor, mask: torch.Tensor, total: Total) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and unbiased variance over the masked entries of every process."""
    mask = mask.to(values.dtype)
    summed, count = total(torch.stack([(values * mask).sum(), mask.sum()]))
    mean = summed / count.clamp(min=1)
    squared = total(((values - mean) ** 2 * mask).sum()) / count.clamp(min=1)
    return mean, squared * count / (count - 1).clamp(min=1)


def masked_var(values: torch.Tensor, mask: torch.Tensor, *, total: Total = _here) -> torch.Tensor:
    """Unbiased variance over the masked entries."""
    return _mean_and_var(values, mask, total)[1]


def masked_whiten(
    values: torch.Tensor, mask: torch.Tensor, *, shift_mean: bool = True, total: Total = _here
) -> torch.Tensor:
    """Zero mean (unless not `shift_mean`) and unit variance over the masked entries; others become 0."""
    mean, var = _mean_and_var(values, mask, total)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened = whitened + mean
    return whitened * mask.to(values.dtype)


def last_agent_index(mask: torch.Tensor) -> torch.Tensor:
    """Per row, the position of its last agent token (-1 for a row with none)."""
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values


def kl_penalty_rewards(
    scores: torch.Tensor, logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor, kl_coef: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(rewards, kl) per token: -kl_coef * (logp - ref_logp) on agent tokens, plus each episode's
    score at its last agent token. `scores` has one value per row."""
    kl = (logprobs - ref_logprobs) * mask
    rewards = -kl_coef * kl
    last = last_agent_index(mask)
    rows = torch.arange(mask.shape[0], device=mask.device)
    has_action = last >= 0
    rewards[rows[has_action], last[has_action]] += scores[has_action].to(rewards.dtype)
    return rewards, kl


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, *, gamma: float = 1.0, lam: float = 0.95
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns) by generalized advantage estimation over agent tokens only.

    The next state of an agent token is the next agent token of the same row (whatever
    observation lies between); after the last one the value is 0 (the episode ended).
    Entries off the mask are 0.

    One reverse loop over token positions, vectorised across rows (as CleanRL does across
    environments): a position off a row's mask leaves that row's running sums as they were.
    """
    on = mask.bool()
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(rewards[:, 0])
    for t in range(rewards.shape[1] - 1, -1, -1):
        here = on[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = torch.where(here, delta + gamma * lam * running, running)
        next_value = torch.where(here, values[:, t], next_value)
        advantages[:, t] = running
    advantages = advantages * mask
    returns = (advantages + values) * mask
    return advantages, returns


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip: float = 0.2,
    count: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO's clipped surrogate over agent tokens; also the clip fraction and approximate KL.
    Means are over `mask`'s tokens, or sums over `count` when given (module docstring);
    `weight` (token_weights) weighs each token instead of the mask's 1."""
    weight = mask if weight is None else weight
    log_ratio = (logprobs - old_logprobs) * mask
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
    loss = masked_mean(torch.maximum(unclipped, clipped), weight, count=count)
    with torch.no_grad():
        clipfrac = masked_mean((clipped > unclipped).to(logprobs.dtype), weight, count=count)
        approx_kl = 0.5 * masked_mean(log_ratio**2, weight, count=count)
    return loss, {"policy/clipfrac": float(clipfrac), "policy/approx_kl": float(approx_kl)}


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip: float = 0.2,
    count: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped value loss over agent tokens (0.5 * the larger squared error); `count` and
    `weight` as in policy_loss."""
    weight = mask if weight is None else weight
    clipped_values = old_values + torch.clamp(values - old_values, -clip, clip)
    unclipped = (values - returns) ** 2
    clipped = (clipped_values - returns) ** 2
    loss = 0.5 * masked_mean(torch.maximum(unclipped, clipped), weight, count=count)
    with torch.no_grad():
        clipfrac = masked_mean((clipped > unclipped).to(values.dtype), weight, count=count)
    return loss, {"value/clipfrac": float(clipfrac)}


def masked_entropy(
    logits: torch.Tensor, mask: torch.Tensor, *, count: torch.Tensor | None = None, weight: torch.Tensor | None = None
) -> torch.Tensor:
    """Mean entropy of the next-token distributions at agent tokens; `count` and `weight` as in policy_loss."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return masked_mean(entropy, mask if weight is None else weight, count=count)


def token_weights(mask: torch.Tensor, aggregation: str) -> torch.Tensor:
    """Each agent token's weight in a loss whose `count` is `loss_count(mask, aggregation)`:
    `token`, every agent token of the minibatch counts the same (so an episode's share of the
    gradient grows with its length); `episode`, each episode counts the same, its tokens
    sharing its weight (GRPO's sequence mean). A sampled episode that derails into a long
    run of garbage then cannot drown out the short episodes where the decisions were made."""
    if aggregation == "token":
        return mask
    if aggregation == "episode":
        return mask / mask.sum(1, keepdim=True).clamp(min=1)
    raise ValueError(f"unknown loss aggregation {aggregation!r}")


def loss_count(mask: torch.Tensor, aggregation: str) -> torch.Tensor:
    """What a minibatch's loss is divided by, this process's part: its agent tokens (`token`)
    or its episodes with at least one agent token (`episode`)."""
    if aggregation == "token":
        return mask.sum()
    return (mask.sum(1) > 0).sum().to(mask.dtype)


def explained_variance(
    values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, *, total: Total = _here
) -> float:
    """1 - Var(returns - values) / Var(returns) over agent tokens (1 is perfect, 0 no better than the mean)."""
    var_returns = masked_var(returns, mask, total=total)
    if var_returns <= 0:
        return float("nan")
    return float(1 - masked_var(returns - values, mask, total=total) / var_returns)


def group_advantages(returns: torch.Tensor, group_size: int, *, mode: str) -> torch.Tensor:
    """Per-episode advantages within consecutive groups of `group_size` samples of one task,
    with no critic: `rloo`, the return minus the mean of the group's other samples (RLOO,
    Ahmadian et al. 2024); `grpo`, the return minus the group's mean over its spread (GRPO,
    Shao et al. 2024; a group whose returns are all equal gets 0)."""
    groups = returns.view(-1, group_size)
    if mode == "rloo":
        others = (groups.sum(1, keepdim=True) - groups) / (group_size - 1)
        return (groups - others).reshape(-1)
    if mode == "grpo":
        spread = groups.std(1, keepdim=True)
        return ((groups - groups.mean(1, keepdim=True)) / (spread + 1e-6)).reshape(-1)
    raise ValueError(f"unknown group advantage {mode!r}")
