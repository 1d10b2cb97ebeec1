"""The error rates a scripted demonstrator makes (the encyclopedia's agent takes them; another
environment's demonstrator may ignore them). Plain data, so a run's config can name them
without importing any environment."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mistakes:
    wrong_result: float = 0.15
    redundant_search: float = 0.15
    no_evidence: float = 0.1
    invalid_action: float = 0.1

    @classmethod
    def none(cls) -> "Mistakes":
        return cls(0.0, 0.0, 0.0, 0.0)
