"""A tiny policy directory on disk (untrained), registered as a Policy, for job tests."""

from __future__ import annotations

from pathlib import Path

from training.envs.encyclopedia.corpus import generate_corpus, generate_tasks


def tiny_policy_dir(path: Path, *, hidden: int = 32, layers: int = 1, heads: int = 2) -> Path:
    from training.policy.model_io import build_model, save_policy, train_tokenizer

    if (path / "config.json").exists():
        return path
    corpus = generate_corpus(seed=0)
    texts = [d.text for d in corpus.documents[:60]] + [t.question for t in generate_tasks(corpus)[:100]]
    tokenizer = train_tokenizer(texts, vocab_size=400)
    return save_policy(build_model(tokenizer, hidden=hidden, layers=layers, heads=heads), tokenizer, path)
