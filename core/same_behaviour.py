"""When two sides of a comparison made the same tool calls and gave the same answer: one
definition for the pairing that builds answer pairs (annotate/services/comparisons.py, over
canonical steps) and the reward model that recognises them (rewardmodel/answer_pairs.py, over
chat messages). Plain Python.

A call is (tool, its arguments as sorted JSON): the same call whatever the key order. An answer
is compared with runs of whitespace collapsed and in any case."""

from __future__ import annotations

import json
from typing import Any


def call_key(tool: Any, arguments: Any) -> tuple[str, str]:
    """A tool call as compared: (the tool's name, the arguments as sorted JSON)."""
    return str(tool or ""), json.dumps(arguments, sort_keys=True, default=str)


def answer_key(answer: str) -> str:
    """An answer as compared: runs of whitespace collapsed, any case."""
    return " ".join(answer.split()).lower()
