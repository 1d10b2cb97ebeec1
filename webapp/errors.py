"""The one error type services raise for domain failures; the edge turns it into a 400."""

from __future__ import annotations


class ArbiterError(Exception):
    """A domain rule was broken by the caller's input. `details` lists specific problems."""

    def __init__(self, message: str, *, details: list[dict] | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or []
