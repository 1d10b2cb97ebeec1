"""The main world: the encyclopedia of seed 0, its tasks and a browser over it, built once
per process (the BM25 index takes a moment) and shared by every job that plays episodes."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from training.envs.encyclopedia.browser import TextBrowser
from training.envs.encyclopedia.corpus import Corpus, TaskSpec, generate_corpus, generate_tasks

SPLITS = ("train", "dev", "eval")


@dataclass(frozen=True)
class World:
    corpus: Corpus
    tasks: tuple[TaskSpec, ...]
    browser: TextBrowser

    def split(self, name: str, limit: int = 0) -> list[TaskSpec]:
        """The tasks of a split in their fixed order; the first `limit` of them when it is above 0."""
        chosen = [t for t in self.tasks if t.split == name]
        return chosen[:limit] if limit else chosen


@cache
def main_world() -> World:
    corpus = generate_corpus(seed=0)
    return World(corpus=corpus, tasks=tuple(generate_tasks(corpus, seed=0)), browser=TextBrowser(corpus))
