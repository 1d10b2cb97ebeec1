"""Where two trajectories of the same task part (plain Python over canonical steps, no Django).

The side-by-side view of an evaluation marks it on both sides: the first step at which the
start and the result did something different is where the behaviour changed. Two steps are
the same when `annotate.trajectory_view.step_key` says so (the same tool call with the same
arguments, key order aside; the same observation; the same thought or answer text, case and
runs of whitespace aside): the key the side-by-side alignment matches steps by. Both count
the steps the two share from the first with `common_start`, so the mark and the aligned rows
agree.

Run the unit tests: `pytest tests/training/test_behaviour_panel.py -k divergence`.
"""

from __future__ import annotations

from annotate.trajectory_view import common_start, step_key


def first_divergence(left: list[dict], right: list[dict]) -> int | None:
    """The index of the first step where the two step lists differ; None when they are the same.
    Every step before it is the same on both sides, so the index is the same on both. When one
    list is the other's beginning, it is where the shorter one ends (that side has no step there)."""
    start = common_start([step_key(step) for step in left], [step_key(step) for step in right])
    return None if start == len(left) == len(right) else start


def step_words(steps: list[dict], index: int | None) -> str:
    """One side's step at `index` in a few words: "search(Acme Glassworks)", "answer “Oslo”",
    "a thought", "an observation of search", or "no step: the episode had ended"."""
    if index is None:
        return ""
    if index >= len(steps):
        return "no step: the episode had ended"
    step = steps[index]
    kind = step.get("kind", "")
    if kind == "action":
        arguments = step.get("arguments", {})
        if isinstance(arguments, dict):
            arguments = ", ".join(str(value) for value in arguments.values())
        return f"{step.get('tool', '')}({arguments})"
    if kind == "answer":
        return f"answer “{step.get('text', '')}”"
    if kind == "observation":
        return f"an observation of {step.get('tool') or 'a tool'}"
    return "a thought"
