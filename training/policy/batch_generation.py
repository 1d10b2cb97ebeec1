"""Many independent generations in one key-value cache: the served policy's batches.

Each row is one choice of one request: its prompt, its own temperature, top-p, token limit and
random generator, and a callback that receives each new token as it is generated (the server
streams it, or watches for a stop string) and may end the row. The prompts are fed left-padded
into one cache (training/policy/rollout.py `CachedBatch`, the rollouts' own), then one token is
decoded for every live row per step; a row that ends (an end-of-turn token, its limit, its
callback) leaves the cache, so a long reply never holds short ones back. A row with a
`constraint` (a reply that must be JSON: training/policy/json_constraint.py) takes the likeliest
(or the sampled) token the constraint allows, trying the next in turn.

A row samples from its own generator, so its tokens do not depend on the rows that share its
batch: a request with a seed gives the same reply alone or batched with others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from training.policy.rollout import CachedBatch


@dataclass
class Row:
    prompt: list[int]
    limit: int  # new tokens at most
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    generator: torch.Generator | None = None
    on_token: Callable[[int], bool] | None = None  # each new token; True ends the row there
    tokens: list[int] = field(default_factory=list)  # generated, without the end-of-turn token
    ended: bool = False  # ended by an end-of-turn token or by its callback (not by its limit)
    constraint: Any = None  # json_constraint.JsonConstraint: which tokens may come next


TRIES = 64  # draws (or likeliest tokens) tried for a constrained row before its whole ranking is scanned


def _pick(logits: torch.Tensor, rows: list[Row]) -> list[int]:
    """One token per row: the most likely where the row is greedy, else a draw from its nucleus."""
    picked = logits.argmax(-1).tolist()
    for i, row in enumerate(rows):
        if row.temperature > 0:
            probs = torch.softmax(logits[i].float() / row.temperature, dim=-1)
            if row.top_p < 1.0:
                ordered, order = probs.sort(descending=True)
                keep = ordered.cumsum(-1) - ordered < row.top_p  # the smallest set whose mass reaches top_p
                probs = torch.zeros_like(probs).scatter_(0, order[keep], ordered[keep])
            picked[i] = int(torch.multinomial(probs, 1, generator=row.generator))
        if row.constraint is not None:
            picked[i] = _allowed(row, logits[i], picked[i], probs if row.temperature > 0 else None)
            row.constraint.take(picked[i])
    return picked


def _allowed(row: Row, logits: torch.Tensor, token: int, probs: torch.Tensor | None) -> int:
    """The token a constrained row takes: the one picked if allowed; else, sampling, another
    draw without the refused ones (TRIES at most); else the likeliest allowed token."""
    constraint = row.constraint
    if constraint.ends:
        return constraint.ends[0]
    if constraint.allows(token):
        return token
    if probs is not None:
        probs = probs.clone()
        for _ in range(TRIES):
            probs[token] = 0
            if float(probs.sum()) <= 0:
                break
            token = int(torch.multinomial(probs, 1, generator=row.generator))
            if constraint.allows(token):
                return token
    for candidate in logits.argsort(descending=True).tolist():
        if constraint.allows(candidate):
            return candidate
    return token  # nothing can continue it: the reply is checked when it ends


@torch.no_grad()
def generate_rows(model, rows: list[Row], *, stop_ids: list[int], pad_id: int) -> None:
    """Generate every row to its end, in place (`row.tokens`, `row.ended`)."""
    if not rows:
        return
    batch = CachedBatch(model, pad_id)
    logits = batch.feed([row.prompt for row in rows])
    live = list(range(len(rows)))
    stops = set(stop_ids)
    while live:
        tokens = _pick(logits, [rows[i] for i in live])
        keep = []
        for position, (i, token) in enumerate(zip(live, tokens)):
            row = rows[i]
            if token in stops:
                row.ended = True
                continue
            row.tokens.append(token)
            if row.on_token is not None and row.on_token(token):
                row.ended = True
                continue
            if len(row.tokens) < row.limit:
                keep.append(position)
        if not keep:
            return
        if len(keep) < len(live):
            batch.keep(keep)
            tokens = [tokens[p] for p in keep]
            live = [live[p] for p in keep]
        step = torch.tensor(tokens, dtype=torch.long, device=batch.device)[:, None]
        logits = batch.feed_tensors(step, torch.ones_like(step))
