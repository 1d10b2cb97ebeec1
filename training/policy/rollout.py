"""Batched multi-turn rollouts in the text browser, with one key-value cache per batch.

Many episodes advance together. The cache of a batch lives across turns: each turn only
the new tokens of each episode (the observation, and the `<|assistant|>` that opens its
next action) are fed, left-padded into one chunk with the padding masked out, and then
actions are decoded token by token until every live row has produced `<|end|>` (or the
action token limit). Finished episodes leave the cache. Each episode records its token
ids, per token whether the agent produced it (the action mask), and the log-probability
of each agent token under the sampling distribution: what PPO needs next.

Each episode samples with its own seeded generator (its uniforms for a whole action drawn
up front, then one vectorised inverse-transform draw per token for all rows), so a batched
rollout gives the same episodes as running them one at a time with the same seeds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from training.env.browser import Episode, TextBrowser
from training.env.corpus import TaskSpec
from training.env.rubric import Outcome, score_episode
from training.policy.layout import encode, observation_text, prompt_text


@dataclass
class RolloutConfig:
    temperature: float = 1.0  # 0 means greedy
    max_action_tokens: int = 48
    batch_size: int = 32
    max_context: int = 1536


@dataclass
class RolloutEpisode:
    task: TaskSpec
    episode: Episode
    ids: list[int] = field(default_factory=list)
    agent_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    outcome: Outcome | None = None

    @property
    def agent_tokens(self) -> int:
        return sum(self.agent_mask)

    def extend(self, tokens: list[int], *, agent: bool, logprobs: list[float] | None = None) -> None:
        self.ids += tokens
        self.agent_mask += [int(agent)] * len(tokens)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(tokens)


def _growing_layer_class():
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A full-attention cache layer that writes into a buffer with spare room (doubled when
        full) instead of concatenating: `DynamicLayer` copies the whole cache at every decoded
        token, which at rollout lengths (hundreds of tokens of observations) costs more than
        the model's own compute for a small policy."""

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                self.buffers, self.length = None, 0
            end = self.length + key_states.shape[-2]
            if self.buffers is None or end > self.buffers[0].shape[-2]:
                grown = []
                for buffer, states in zip(self.buffers or (None, None), (key_states, value_states)):
                    room = states.new_empty(*states.shape[:-2], max(64, 2 * end), states.shape[-1])
                    if buffer is not None:
                        room[..., :self.length, :] = buffer[..., :self.length, :]
                    grown.append(room)
                self.buffers = grown
            self.buffers[0][..., self.length:end, :] = key_states
            self.buffers[1][..., self.length:end, :] = value_states
            self.length = end
            self.keys, self.values = self.buffers[0][..., :end, :], self.buffers[1][..., :end, :]
            return self.keys, self.values

        def batch_select_indices(self, indices):
            if self.is_initialized and self.buffers is not None:
                self.buffers = [b[indices, ...] for b in self.buffers]
                self.keys, self.values = (b[..., :self.length, :] for b in self.buffers)

    return GrowingLayer


def new_cache(model):
    """A key-value cache for `model`: growing buffers where every layer is plain full
    attention (Llama-style), else whatever `DynamicCache` picks for the model's config."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    cache = DynamicCache(config=model.config)
    if cache.layers and all(type(layer) is DynamicLayer for layer in cache.layers):
        growing = _growing_layer_class()
        cache.layers = [growing() for _ in cache.layers]
    return cache


class CachedBatch:
    """A batch of sequences in one key-value cache; rows may receive chunks of different lengths."""

    def __init__(self, model, pad_id: int):
        self.model, self.pad_id = model, pad_id
        self.device = next(model.parameters()).device
        self.past = new_cache(model)
        self.attention: torch.Tensor | None = None
        self.next_position: torch.Tensor | None = None
        self.keep_logits = True

    @torch.no_grad()
    def feed(self, chunks: list[list[int]], masks: list[list[int]] | None = None) -> torch.Tensor:
        """Append one chunk per row (left-padded, padding masked); returns each row's last logits."""
        masks = masks or [[1] * len(c) for c in chunks]
        width = max(len(c) for c in chunks)
        ids = torch.full((len(chunks), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunks), width), dtype=torch.long)
        for i, (c, m) in enumerate(zip(chunks, masks)):
            if c:
                ids[i, width - len(c):] = torch.tensor(c)
                mask[i, width - len(c):] = torch.tensor(m)
        return self.feed_tensors(ids.to(self.device), mask.to(self.device))

    @torch.no_grad()
    def feed_tensors(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """As `feed`, for chunks already left-padded into (rows, width) tensors on the device."""
        if self.attention is None:
            self.attention = mask
            self.next_position = torch.zeros(ids.size(0), dtype=torch.long, device=self.device)
        else:
            self.attention = torch.cat([self.attention, mask], dim=1)
        positions = self.next_position[:, None] + (mask.cumsum(-1) - 1).clamp(min=0)
        # Only the last position's logits are used: `logits_to_keep` skips the output
        # layer for the rest of a prefill (models without the argument compute them all).
        extra = {"logits_to_keep": 1} if self.keep_logits else {}
        try:
            out = self.model(input_ids=ids, attention_mask=self.attention, position_ids=positions,
                             past_key_values=self.past, use_cache=True, **extra)
        except TypeError:
            if not extra:
                raise
            self.keep_logits = False
            out = self.model(input_ids=ids, attention_mask=self.attention, position_ids=positions,
                             past_key_values=self.past, use_cache=True)
        self.past = out.past_key_values
        self.next_position = self.next_position + mask.sum(-1)
        return out.logits[:, -1, :]

    def keep(self, rows: list[int]) -> None:
        """Drop every row not in `rows` from the cache."""
        index = torch.tensor(rows, dtype=torch.long, device=self.device)
        self.past.batch_select_indices(index)
        self.attention = self.attention[index]
        self.next_position = self.next_position[index]


def sample_actions(batch: CachedBatch, logits: torch.Tensor, generators: list[torch.Generator], *,
                   temperature: float, max_new: int, end_id: int) -> tuple[list[list[int]], list[list[float]], list[int]]:
    """Decode one action per row. Returns tokens, their log-probs, and per row the tokens
    sampled but not yet fed to the cache (the caller feeds them first next turn).

    Sampling is vectorised across rows by inverse transform: each row draws its uniforms
    for the whole action from its own generator up front (`max_new` of them, whether it
    uses them or not), so a row's tokens do not depend on which rows share its batch."""
    rows, device = logits.size(0), logits.device
    if temperature > 0:
        uniforms = torch.stack([torch.rand(max_new, generator=g, dtype=torch.float64) for g in generators]).to(device)
    tokens = torch.full((rows, max_new), batch.pad_id, dtype=torch.long, device=device)
    logps = torch.zeros((rows, max_new), device=device)
    finished = torch.zeros(rows, dtype=torch.bool, device=device)
    lengths = torch.zeros(rows, dtype=torch.long, device=device)
    for step in range(max_new):
        scaled = logits.float() / temperature if temperature > 0 else logits.float()
        log_probs = torch.log_softmax(scaled, dim=-1)
        if temperature > 0:
            cdf = log_probs.double().exp().cumsum(-1)
            token = torch.searchsorted(cdf, uniforms[:, step:step + 1] * cdf[:, -1:], right=True).squeeze(1)
            token = token.clamp_(max=log_probs.size(-1) - 1)
        else:
            token = log_probs.argmax(-1)
        active = ~finished
        tokens[:, step] = torch.where(active, token, batch.pad_id)
        logps[:, step] = log_probs.gather(1, token[:, None]).squeeze(1)
        lengths += active
        finished |= token == end_id
        if step == max_new - 1 or bool(finished.all()):
            break
        logits = batch.feed_tensors(tokens[:, step:step + 1], active[:, None].long())
    # Rows still active at the last step have their last token not yet in the cache.
    last_active = (lengths == step + 1).tolist()
    token_rows, logp_rows = tokens.tolist(), logps.tolist()
    out_tokens = [t[:n] for t, n in zip(token_rows, lengths.tolist())]
    out_logps = [lp[:len(t)] for lp, t in zip(logp_rows, out_tokens)]
    unfed = [t[-1] if t and last else None for t, last in zip(out_tokens, last_active)]
    return out_tokens, out_logps, unfed


def rollout(model, tokenizer, browser, tasks: list[TaskSpec], config: RolloutConfig,
            *, seeds: list[int] | None = None, progress=None) -> list[RolloutEpisode]:
    """Run one episode per task (in batches of `config.batch_size`). `browser` is a TextBrowser,
    or a function giving each task its browser (tasks from several worlds in one batch)."""
    seeds = seeds if seeds is not None else list(range(len(tasks)))
    results: list[RolloutEpisode] = []
    for start in range(0, len(tasks), config.batch_size):
        chunk = list(zip(tasks[start:start + config.batch_size], seeds[start:start + config.batch_size]))
        results.extend(_rollout_batch(model, tokenizer, browser, chunk, config))
        if progress:
            progress(min(1.0, (start + len(chunk)) / len(tasks)))
    return results


def _rollout_batch(model, tokenizer, browser, chunk, config) -> list[RolloutEpisode]:
    end_id = tokenizer.convert_tokens_to_ids("<|end|>")
    assistant = encode(tokenizer, "<|assistant|>")
    browsers = [browser(task) if callable(browser) else browser for task, _ in chunk]
    episodes = [RolloutEpisode(task=task, episode=b.reset(task.question)) for (task, _), b in zip(chunk, browsers)]
    generators = [torch.Generator().manual_seed(seed) for _, seed in chunk]
    # What each live row must feed before its next action: the prompt at first.
    pending = [encode(tokenizer, prompt_text(task.question)) for task, _ in chunk]
    for e, tokens in zip(episodes, pending):
        e.extend(tokens, agent=False)
    batch = CachedBatch(model, tokenizer.pad_token_id)
    live = list(range(len(episodes)))
    while live:
        for i in live:
            episodes[i].extend(assistant, agent=False)
        logits = batch.feed([pending[i] + assistant for i in live])
        actions, logps, unfed = sample_actions(batch, logits, [generators[i] for i in live],
                                               temperature=config.temperature, max_new=config.max_action_tokens,
                                               end_id=end_id)
        keep, still = [], []
        for row, (i, tokens, lp, tail) in enumerate(zip(live, actions, logps, unfed)):
            e = episodes[i]
            e.extend(tokens, agent=True, logprobs=lp)
            pending[i] = [tail] if tail is not None else []
            if not tokens or tokens[-1] != end_id:  # ran out of action tokens: close the turn for it
                e.extend([end_id], agent=False)
                pending[i].append(end_id)
            text = tokenizer.decode([t for t in tokens if t != end_id], skip_special_tokens=False)
            result = browsers[i].step(e.episode, text)
            if result.done:
                continue
            obs = encode(tokenizer, observation_text(result.observation))
            e.extend(obs, agent=False)
            pending[i] += obs
            if len(e.ids) + config.max_action_tokens + len(assistant) > config.max_context:
                e.episode.truncated = True
                continue
            keep.append(row)
            still.append(i)
        if still and len(still) < len(live):
            batch.keep(keep)
        live = still
    for e in episodes:
        e.outcome = score_episode(e.episode, e.task.answer)
    return episodes
