"""An experiment, not the product: rollouts whose rows do not wait for each other.

The product's rollout (`training/policy/rollout.py`) decodes turn by turn: every live row
decodes its action, then all of them feed their observations together. This module keeps
the design that was tried against it (benchmarks/RESULTS.md, "Rollout throughput"), so the
comparison can be rerun:

    .venv/bin/python benchmarks/rollout_throughput.py --threads 1 --tasks 124 \
        --against benchmarks/experiments/rollout_rows.py

Each forward pass feeds every decoding row its last sampled token. A row whose action ends
steps its browser at once and waits with its observation for the next prefill, which
happens when `PREFILL_SHARE` of the live rows wait (1.0 gives turn-synchronous decoding);
a prefill feeds the waiting rows their observations and the decoding rows their next token
in one left-padded chunk. When an episode ends, the next task takes its row (its old keys
masked out, its positions restarting at 0), and the cache is compacted (each row's live
keys moved together; keys carry their rotary positions, so nothing the model computes
changes) when that would halve its width. Per-episode generators, as in the product, keep
a row's tokens independent of its batch.

On the 2-core CPU it is slower than the product: with every row kept busy, each step runs
the whole batch over long contexts, where the product's batches shrink as episodes end.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from training.env.rubric import score_episode  # noqa: E402
from training.policy.layout import encode, observation_text, prompt_text  # noqa: E402
from training.policy.rollout import CachedBatch, RolloutConfig, RolloutEpisode  # noqa: E402,F401


class RowBatch(CachedBatch):
    """A cached batch whose rows can restart as new sequences, and whose masked columns can be dropped."""

    @property
    def can_compact(self) -> bool:
        layers = getattr(self.past, "layers", None) or []
        return bool(layers) and all(hasattr(layer, "buffers") for layer in layers)

    def restart_row(self, row: int) -> None:
        self.attention[row] = 0
        self.next_position[row] = 0

    def compactable_share(self) -> float:
        """The share of the cache's width that compacting would drop."""
        if self.attention is None:
            return 0.0
        return 1.0 - int(self.attention.sum(-1).max()) / self.attention.size(1)

    def compact(self) -> None:
        """Each row's live keys move to the right end, in order; the cache becomes as wide as the longest row."""
        width = max(1, int(self.attention.sum(-1).max()))
        order = torch.arange(self.attention.size(1), device=self.device).expand_as(self.attention)
        index = torch.argsort(self.attention * self.attention.size(1) + order, dim=-1, stable=True)[:, -width:]
        for layer in self.past.layers:
            if layer.buffers is None:
                continue
            gather = index[:, None, :, None].expand(index.size(0), layer.buffers[0].shape[1], width,
                                                    layer.buffers[0].shape[-1])
            layer.buffers = [torch.gather(b[..., :layer.length, :], 2, gather) for b in layer.buffers]
            layer.length = width
            layer.keys, layer.values = layer.buffers
        self.attention = torch.gather(self.attention, 1, index)


def rollout(model, tokenizer, browser, tasks, config: RolloutConfig, *, seeds=None, progress=None):
    seeds = seeds if seeds is not None else list(range(len(tasks)))
    return _Engine(model, tokenizer, browser, list(zip(tasks, seeds)), config, progress).run()


class ActionSampler:
    """Samples each row's next token from its own uniforms, vectorised across rows.

    Sampling is by inverse transform: a row draws the uniforms for a whole action from its
    own generator when the action starts (`max_new` of them, whether it uses them or not),
    so its tokens do not depend on which rows share its batch or when they are fed."""

    def __init__(self, generators: list[torch.Generator], *, temperature: float, max_new: int):
        self.generators, self.temperature, self.max_new = generators, temperature, max_new
        self.uniforms: dict[int, torch.Tensor] = {}

    def start_action(self, row: int) -> None:
        if self.temperature > 0:
            self.uniforms[row] = torch.rand(self.max_new, generator=self.generators[row], dtype=torch.float64)

    def sample(self, logits: torch.Tensor, rows: list[int], steps: list[int]) -> tuple[list[int], list[float]]:
        """One token per row: `logits[k]` belongs to episode `rows[k]`, at step `steps[k]` of its action."""
        scaled = logits.float() / self.temperature if self.temperature > 0 else logits.float()
        log_probs = torch.log_softmax(scaled, dim=-1)
        if self.temperature > 0:
            u = torch.tensor([float(self.uniforms[r][s]) for r, s in zip(rows, steps)],
                             dtype=torch.float64, device=logits.device)
            cdf = log_probs.double().exp().cumsum(-1)
            token = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).squeeze(1)
            token = token.clamp_(max=log_probs.size(-1) - 1)
        else:
            token = log_probs.argmax(-1)
        return token.tolist(), log_probs.gather(1, token[:, None]).squeeze(1).tolist()


PREFILL_SHARE = 0.5  # a prefill once this share of the live rows waits (or none decodes)
COMPACT_SHARE = 0.5  # compact the cache once that would drop this share of its width


class _Engine:
    """The rollout loop: rows decode without waiting for each other, and a finished
    episode's row takes the next task."""

    def __init__(self, model, tokenizer, browser, jobs, config: RolloutConfig, progress):
        self.model, self.tokenizer, self.config, self.progress = model, tokenizer, config, progress
        self.end_id = tokenizer.convert_tokens_to_ids("<|end|>")
        self.assistant = encode(tokenizer, "<|assistant|>")
        self.jobs = jobs
        self.browsers = [browser(task) if callable(browser) else browser for task, _ in jobs]
        self.episodes: list[RolloutEpisode] = []
        self.sampler = ActionSampler([torch.Generator().manual_seed(seed) for _, seed in jobs],
                                     temperature=config.temperature, max_new=config.max_action_tokens)
        # to_feed[i]: the tokens episode i must feed next. One token while it decodes an
        # action; more while it waits for a prefill (the prompt at first, later an observation).
        self.to_feed: list[list[int]] = []
        self.actions: list[list[int]] = []
        self.action_logps: list[list[float]] = []
        self.decoding: list[bool] = []
        self.done: list[bool] = []
        self.finished = 0

    def start_episode(self) -> int | None:
        """Open the next task's episode; its index, or None when no task is left."""
        i = len(self.episodes)
        if i == len(self.jobs):
            return None
        task = self.jobs[i][0]
        e = RolloutEpisode(task=task, episode=self.browsers[i].reset(task.question))
        e.extend(encode(self.tokenizer, prompt_text(task.question)), agent=False)
        e.extend(self.assistant, agent=False)
        self.episodes.append(e)
        self.to_feed.append(list(e.ids))
        self.actions.append([])
        self.action_logps.append([])
        self.decoding.append(False)
        self.done.append(False)
        return i

    def run(self) -> list[RolloutEpisode]:
        batch = RowBatch(self.model, self.tokenizer.pad_token_id)
        slots = [i for i in (self.start_episode() for _ in range(self.config.batch_size)) if i is not None]
        while slots:
            slots = self.fill_rows(batch, slots)
            if not slots:
                break
            live = [i for i in slots if not self.done[i]]
            waiting = [i for i in live if not self.decoding[i]]
            prefill = bool(waiting) and (len(waiting) == len(live) or len(waiting) >= PREFILL_SHARE * len(live))
            fed = [i for i in live if self.decoding[i] or prefill]
            fed_set = set(fed)
            logits = batch.feed([self.to_feed[i] if i in fed_set else [] for i in slots])
            row_of = {i: row for row, i in enumerate(slots)}
            for i in fed:
                if not self.decoding[i]:
                    self.decoding[i] = True
                    self.sampler.start_action(i)
            tokens, logps = self.sampler.sample(logits[[row_of[i] for i in fed]], fed,
                                                [len(self.actions[i]) for i in fed])
            for i, token, logp in zip(fed, tokens, logps):
                self.actions[i].append(token)
                self.action_logps[i].append(logp)
                self.to_feed[i] = [token]
                if token == self.end_id or len(self.actions[i]) == self.config.max_action_tokens:
                    self.end_action(i)
        return self.episodes

    def fill_rows(self, batch: RowBatch, slots: list[int]) -> list[int]:
        """Give the rows of finished episodes to new tasks (where the cache can be compacted),
        drop the rows no task needs, and compact the cache when most of it is masked."""
        free = [row for row, i in enumerate(slots) if self.done[i]]
        if not free:
            return slots
        if batch.attention is not None and batch.can_compact:
            for row in free:
                i = self.start_episode()
                if i is None:
                    break
                batch.restart_row(row)
                slots[row] = i
        keep = [row for row, i in enumerate(slots) if not self.done[i]]
        if len(keep) < len(slots):
            if not keep:
                return []
            batch.keep(keep)
            slots = [slots[row] for row in keep]
        if batch.can_compact and batch.compactable_share() > COMPACT_SHARE:
            batch.compact()
        return slots

    def end_action(self, i: int) -> None:
        """Record episode i's finished action, step its browser, and queue its observation."""
        e, tokens = self.episodes[i], self.actions[i]
        e.extend(tokens, agent=True, logprobs=self.action_logps[i])
        self.actions[i], self.action_logps[i], self.decoding[i] = [], [], False
        if tokens[-1] != self.end_id:  # ran out of action tokens: close the turn for it
            e.extend([self.end_id], agent=False)
            self.to_feed[i].append(self.end_id)
        text = self.tokenizer.decode([t for t in tokens if t != self.end_id], skip_special_tokens=False)
        result = self.browsers[i].step(e.episode, text)
        if not result.done:
            obs = encode(self.tokenizer, observation_text(result.observation))
            e.extend(obs, agent=False)
            if len(e.ids) + self.config.max_action_tokens + len(self.assistant) > self.config.max_context:
                e.episode.truncated = True
            else:
                e.extend(self.assistant, agent=False)
                self.to_feed[i] += obs + self.assistant
                return
        self.done[i] = True
        e.outcome = score_episode(e.episode, e.task.answer)
        self.finished += 1
        if self.progress:
            self.progress(self.finished / len(self.jobs))
