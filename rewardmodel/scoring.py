"""Scores from a trained reward model: one scalar per trajectory, higher is better.

    scorer = RewardScorer("var/reward-models/1/model")
    chosen, rejected = scorer.score_pairs(rows)               # rows in the `trl` export form
    scores = scorer.score_episodes([(question, steps), ...])  # stored trajectories

Texts are built and tokenized exactly as in training: the same serialization (the tokens
per side come from the directory's arbiter_reward_model.json), TRL's end token appended,
right padding with the model's pad id (a decoder reads its score at the last token that is
not padding; an encoder masks the padding), and only input_ids and attention_mask passed,
as TRL's collator does. Texts are batched by length so little padding is computed.
"""

from __future__ import annotations

import json
from pathlib import Path

from rewardmodel.backbones import BackboneError, max_context, settle_special_tokens
from rewardmodel.serialize import episode_text, pair_text
from rewardmodel.train import META_FILE


class RewardScorer:
    """A reward model directory (out_dir/model of a training run) loaded for scoring, in eval mode.

    An ensemble's directory lists its other members in its metadata (rewardmodel/train.py):
    each is loaded too, `score_*` give the members' mean, and `member_scores` each member's."""

    def __init__(self, model_dir: str | Path, *, device: str = "cpu", _member: bool = False):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = Path(model_dir)
        if not (path / "config.json").exists():
            raise BackboneError(f"{path}: no config.json, so not a reward model directory.")
        meta = json.loads((path / META_FILE).read_text()) if (path / META_FILE).exists() else {}
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32)
        except (ValueError, OSError, KeyError) as exc:
            raise BackboneError(f"{path}: cannot be loaded as a reward model ({exc}).") from None
        self.model.to(device).eval()
        if meta.get("eos_token"):
            self.tokenizer.eos_token = meta["eos_token"]
        if self.model.config.num_labels != 1:
            raise BackboneError(f"{path}: a reward model has one output, this one has {self.model.config.num_labels}.")
        settle_special_tokens(self.model, self.tokenizer)
        self.device = device
        self.view = meta.get("view", "path")  # what it read in training (rewardmodel/serialize.py)
        self.max_tokens = max_context(self.model, self.tokenizer, meta.get("max_tokens"))
        eos_ids = self.tokenizer(self.tokenizer.eos_token, add_special_tokens=False)["input_ids"]
        self.text_tokens = self.max_tokens - len(eos_ids)  # the budget of a serialized text, before the end token
        self.members = [self]
        for member in [] if _member else meta.get("members", []):
            where = (path / str(member)).resolve()
            if not where.is_relative_to(path.resolve()):
                raise BackboneError(f"{path}: ensemble member {member!r} lies outside the model directory.")
            self.members.append(RewardScorer(where, device=device, _member=True))

    def member_scores(self, texts: list[str], batch_size: int = 32) -> list[list[float]]:
        """Each member's scores of serialized texts (one list per member; one member unless an ensemble)."""
        return [member._score_texts(texts, batch_size) for member in self.members]

    def score_texts(self, texts: list[str], batch_size: int = 32) -> list[float]:
        """Scores of serialized texts (an ensemble's: the members' mean). A text longer than the
        model's budget loses its end: serialize to fit."""
        by_member = self.member_scores(texts, batch_size)
        return [sum(scores) / len(scores) for scores in zip(*by_member)]

    def episode_texts(self, items: list[tuple[str, list[dict]]]) -> list[str]:
        """(question, canonical steps) trajectories serialized as this model reads them."""
        return [episode_text(question, steps, self.tokenizer, self.text_tokens, self.view) for question, steps in items]

    def _score_texts(self, texts: list[str], batch_size: int) -> list[float]:
        import torch

        eos = self.tokenizer.eos_token
        texts = [text if text.endswith(eos) else text + eos for text in texts]
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        scores = [0.0] * len(texts)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                batch = order[start : start + batch_size]
                encoded = self.tokenizer(
                    [texts[i] for i in batch],
                    padding=True,
                    truncation=True,
                    max_length=self.max_tokens,
                    return_tensors="pt",
                )
                logits = self.model(
                    input_ids=encoded["input_ids"].to(self.device),
                    attention_mask=encoded["attention_mask"].to(self.device),
                ).logits
                for i, value in zip(batch, logits[:, 0].float().tolist(), strict=True):
                    scores[i] = value
        return scores

    def score_pairs(self, rows: list[dict], batch_size: int = 32) -> tuple[list[float], list[float]]:
        """(chosen scores, rejected scores) of `trl`-form rows."""
        texts = [
            pair_text(row["prompt"], row[side], self.tokenizer, self.text_tokens, self.view)
            for side in ("chosen", "rejected")
            for row in rows
        ]
        scores = self.score_texts(texts, batch_size)
        return scores[: len(rows)], scores[len(rows) :]

    def score_episodes(self, items: list[tuple[str, list[dict]]], batch_size: int = 32) -> list[float]:
        """Scores of (question, canonical steps) trajectories."""
        return self.score_texts(self.episode_texts(items), batch_size)
