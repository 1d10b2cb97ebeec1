"""A run's lineage: the rows it read (inputs) and wrote (outputs), each a link to its page.

Every link has one shape, {direction, type, id, label, url}, which the run's page, the API and
the pipeline's report read; `lineage_link` is the one place it is written (a code rule,
scripts/code_rules.py, finds a link built by hand). `run_add_lineage` (webapp/runs/services.py)
appends a run's outputs as it makes them.
"""

from __future__ import annotations


def lineage_link(kind: str, row_id: int, label, url: str, *, direction: str = "input") -> dict:
    """A link to one row: `kind` is its type as pages show it ("policy", "reward model",
    "dataset", "campaign", "evaluation", "judge", "run"); `label` is shown (str of the row)."""
    if direction not in ("input", "output"):
        raise ValueError(f"a lineage link is an input or an output, not {direction!r}")
    return {"direction": direction, "type": kind, "id": row_id, "label": str(label), "url": url}
