"""The one error type services raise for domain failures; the edge turns it into a 400."""

from __future__ import annotations

from collections.abc import Mapping


class ArbiterError(Exception):
    """A domain rule was broken by the caller's input. `details` lists specific problems:
    `core.problems.Problem`s (a message, with its field or line), or an import's stored errors,
    which `core.problems.problem_of` reads alike."""

    def __init__(self, message: str, *, details: list[Mapping] | list[str] | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or []
