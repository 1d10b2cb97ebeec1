"""What the comparison screen shows of two trajectories: aligned steps, the first
difference, and each quote checked against the pages that agent actually opened.

Plain Python over canonical steps (no Django), shared by the labeling screen and the
before/after dashboards. Text is passed through untouched: templates escape it.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

# Observations from these tools are not pages the agent read (result lists, receipts).
NOT_PAGES = {"search", "quote", "answer", "user", "find"}
_SPACE = re.compile(r"\s+")


@dataclass
class QuoteView:
    text: str
    found: bool


@dataclass
class StepView:
    index: int
    kind: str
    text: str = ""
    tool: str = ""
    arguments: str = ""
    is_error: bool = False
    title: str = ""
    quotes: list[QuoteView] = field(default_factory=list)


@dataclass
class Row:
    index: int
    left: StepView | None
    right: StepView | None
    first_difference: bool = False


@dataclass
class PairView:
    rows: list[Row]
    first_difference: int | None
    left_steps: int
    right_steps: int


def _normalize(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def opened_pages(steps: list[dict]) -> list[str]:
    """Texts of pages the agent opened: observations not produced by search-like tools."""
    pages = []
    for step in steps:
        if step.get("kind") != "observation" or step.get("is_error"):
            continue
        if step.get("tool", "") in NOT_PAGES:
            continue
        pages.append(_normalize(step.get("content", "")))
    return pages


def quote_found(quote: str, pages: list[str]) -> bool:
    needle = _normalize(quote)
    return bool(needle) and any(needle in page for page in pages)


def _arguments_text(arguments) -> str:
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, dict) and len(arguments) == 1:
        (value,) = arguments.values()
        if isinstance(value, (str, int, float)):
            return str(value)
    return json.dumps(arguments, ensure_ascii=False)


def step_views(steps: list[dict]) -> list[StepView]:
    pages = opened_pages(steps)
    views = []
    for i, step in enumerate(steps):
        kind = step.get("kind", "")
        view = StepView(index=i, kind=kind)
        if kind in ("thought", "answer"):
            view.text = step.get("text", "")
        if kind == "answer":
            view.quotes = [QuoteView(q, quote_found(q, pages)) for q in step.get("quotes", [])]
        elif kind == "action":
            view.tool = step.get("tool", "")
            view.arguments = _arguments_text(step.get("arguments", {}))
            if view.tool == "quote" and isinstance(step.get("arguments"), dict):
                quote = str(step["arguments"].get("text", ""))
                view.quotes = [QuoteView(quote, quote_found(quote, pages))]
        elif kind == "observation":
            view.tool = step.get("tool", "")
            view.text = step.get("content", "")
            view.is_error = bool(step.get("is_error")) or view.text.lower().startswith("error")
            view.title = step.get("title", "")
        views.append(view)
    return views


def first_difference(left: list[dict], right: list[dict]) -> int | None:
    """Index of the first step where the two trajectories differ; None when identical."""
    for i, (a, b) in enumerate(zip(left, right)):
        if json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
            return i
    return None if len(left) == len(right) else min(len(left), len(right))


def pair_view(left: list[dict], right: list[dict]) -> PairView:
    lv, rv = step_views(left), step_views(right)
    diff = first_difference(left, right)
    rows = [
        Row(
            index=i,
            left=lv[i] if i < len(lv) else None,
            right=rv[i] if i < len(rv) else None,
            first_difference=(i == diff),
        )
        for i in range(max(len(lv), len(rv)))
    ]
    return PairView(rows=rows, first_difference=diff, left_steps=len(lv), right_steps=len(rv))
