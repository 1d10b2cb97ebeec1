"""Episodes as tensors for the policy-gradient update (plain torch, no Django).

`episode_batch` pads a batch of episodes and lays their agent tokens out compactly;
`forward_agent_tokens` runs the trunk once over whole episodes and the output layer and
value head only at the agent tokens. RL's update (training/rl/trainer.py) and the
evaluation's KL to the reference (training/evaluation/episodes.py) read episodes this way.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EpisodeBatch:
    """Episodes as right-padded tensors, plus the agent tokens in a compact (rows, A) layout.

    `positions[r, a]` is where row r's a-th agent token sits in `ids`; the state that
    produced it is the hidden state one position earlier. Every PPO quantity (log-probs,
    values, rewards, advantages) lives in the compact layout, masked by `mask`.
    """

    ids: object  # (rows, L) token ids, right padded
    attention: object  # (rows, L)
    positions: object  # (rows, A) indices into ids of the agent tokens (0 where masked)
    mask: object  # (rows, A) 1 on real agent tokens
    tokens: object  # (rows, A) the agent token ids

    def rows(self, index) -> EpisodeBatch:
        return EpisodeBatch(
            self.ids[index], self.attention[index], self.positions[index], self.mask[index], self.tokens[index]
        )


def episode_batch(episodes, pad_id: int, device) -> EpisodeBatch:
    import torch

    longest = max(len(e.ids) for e in episodes)
    most = max(1, max(e.agent_tokens for e in episodes))
    ids = torch.full((len(episodes), longest), pad_id, dtype=torch.long)
    attention = torch.zeros((len(episodes), longest), dtype=torch.long)
    positions = torch.zeros((len(episodes), most), dtype=torch.long)
    mask = torch.zeros((len(episodes), most))
    for row, e in enumerate(episodes):
        ids[row, : len(e.ids)] = torch.tensor(e.ids)
        attention[row, : len(e.ids)] = 1
        where = [t for t, m in enumerate(e.agent_mask) if m]
        positions[row, : len(where)] = torch.tensor(where, dtype=torch.long)
        mask[row, : len(where)] = 1
    tokens = ids.gather(1, positions)
    return EpisodeBatch(ids.to(device), attention.to(device), positions.to(device), mask.to(device), tokens.to(device))


def forward_agent_tokens(model, value_head, batch: EpisodeBatch, temperature: float, *, detach_values: bool = False):
    """(logits, values) at the agent tokens: each from the hidden state one position before.

    The trunk runs once over the whole episodes; the output layer and the value head run
    only at the agent tokens' positions, which saves most of the output layer's cost.
    `detach_values`: the value loss reaches the value head only (the value warm-up).
    """
    import torch

    hidden = model.base_model(input_ids=batch.ids, attention_mask=batch.attention).last_hidden_state
    before = (batch.positions - 1).clamp(min=0)
    states = hidden.gather(1, before[..., None].expand(-1, -1, hidden.size(-1)))
    logits = model.get_output_embeddings()(states).float()
    if temperature > 0:
        logits = logits / temperature
    if value_head is None:
        return logits, torch.zeros_like(batch.mask)
    values = value_head(states.detach() if detach_values else states).squeeze(-1).float()
    return logits, values


def token_logprobs(logits, tokens):
    import torch

    return torch.log_softmax(logits, dim=-1).gather(-1, tokens[..., None]).squeeze(-1)
