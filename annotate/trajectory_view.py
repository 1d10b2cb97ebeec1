"""What the comparison screen shows of two trajectories: aligned steps, the first
difference, runs of identical steps to fold, and each quote checked against the pages that
agent actually opened.

Plain Python over canonical steps (no Django), shared by the labeling screen and the
before/after dashboards. Text is passed through untouched: templates escape it.

Alignment. By default the two step lists are aligned by content: each step gets a key (the
same tool call with the same arguments, the same observation, the same thought or answer
text once case and runs of whitespace are ignored), the common start and end are matched
as they are, and the rest is aligned by Needleman-Wunsch (global alignment). Steps of the
same kind may sit side by side when they differ (a changed step); a step with no partner
on the other side leaves an empty cell (a gap). So when one agent takes a detour and comes
back, the rows match again after the detour instead of staying shifted. The table costs
O(n*m) time and memory; past `ALIGN_MAX_CELLS` cells the view falls back to aligning by
index and says so in `PairView.note`. `align="index"` asks for index alignment outright.

Run the unit tests: `pytest tests/annotate/test_trajectory_view.py`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

# Observations from these tools are not pages the agent read (result lists, receipts).
NOT_PAGES = {"search", "quote", "answer", "user", "find"}
_SPACE = re.compile(r"\s+")

Align = Literal["content", "index"]
# 500 x 500 steps (settings.TRAJECTORY_MAX_STEPS) is a fraction of a second in pure Python;
# beyond that, align by index rather than hold up the page.
ALIGN_MAX_CELLS = 500 * 500
# Runs of at least this many identical rows fold into one "N identical steps" row.
FOLD_MIN = 3

# Alignment weights: a match must beat everything; a changed step of the same kind beats
# two gaps (so divergent steps sit side by side); steps of different kinds are never paired.
MATCH, SAME_TOOL, SAME_KIND, OTHER_KIND, GAP = 2, 0, -1, -3, -1


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
    """One row of the alignment: a step of each side, or a gap (None) on one side.

    `index` is the row's position; each step keeps its own side's step index."""

    index: int
    left: StepView | None
    right: StepView | None
    first_difference: bool = False
    same: bool = False

    @property
    def status(self) -> str:
        """same, changed, left-only or right-only."""
        if self.same:
            return "same"
        if self.left is None:
            return "right-only"
        if self.right is None:
            return "left-only"
        return "changed"


@dataclass
class Block:
    """Consecutive rows; `folded` when they are a run of at least FOLD_MIN identical rows."""

    rows: list[Row]
    folded: bool = False

    @property
    def first(self) -> Row:
        return self.rows[0]

    @property
    def last(self) -> Row:
        return self.rows[-1]


@dataclass
class PairView:
    rows: list[Row]
    first_difference: int | None  # the row index of the first row that is not the same
    left_steps: int
    right_steps: int
    align: Align = "content"  # the alignment actually used
    note: str = ""  # why the alignment asked for was not used
    blocks: list[Block] = field(default_factory=list)

    @property
    def identical_rows(self) -> int:
        return sum(row.same for row in self.rows)


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


def step_key(step: dict) -> tuple:
    """What makes two steps the same: the same tool call with the same arguments (key order
    aside), the same observation, the same thought or answer text (case and whitespace aside)."""
    kind = step.get("kind", "")
    if kind == "action":
        arguments = step.get("arguments", {})
        return (kind, step.get("tool", ""), json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str))
    if kind == "observation":
        return (kind, step.get("tool", ""), bool(step.get("is_error")), _normalize(str(step.get("content", ""))))
    return (kind, _normalize(str(step.get("text", step.get("content", "")))))


def _codes(keys: list[tuple], classes: dict) -> list[tuple[int, int, int]]:
    """Per step: (key id, kind-and-tool id, kind id) as small ints, so the table compares ints."""
    out = []
    for key in keys:
        kind = key[0]
        key_id = classes.setdefault(("key", key), len(classes))
        # Only tool calls and observations are "nearly the same" when the tool matches.
        tool_id = (
            classes.setdefault(("tool", kind, key[1]), len(classes))
            if kind in ("action", "observation")
            else -1 - key_id
        )
        kind_id = classes.setdefault(("kind", kind), len(classes))
        out.append((key_id, tool_id, kind_id))
    return out


def _needleman_wunsch(left: list[tuple], right: list[tuple]) -> list[tuple[int | None, int | None]]:
    """Global alignment of two key lists; pairs of positions, None for a gap. Ties prefer a
    pair, and otherwise put left-only rows before right-only ones (the traceback runs
    backwards), so the result is deterministic."""
    classes: dict = {}
    a, b = _codes(left, classes), _codes(right, classes)
    n, m = len(a), len(b)
    prev = [GAP * j for j in range(m + 1)]
    trace = [bytearray([2]) * (m + 1)]  # 0: pair, 1: left only (up), 2: right only (left)
    for i in range(1, n + 1):
        key_id, tool_id, kind_id = a[i - 1]
        pair_cost = [
            MATCH if bk == key_id else SAME_TOOL if bt == tool_id else SAME_KIND if bc == kind_id else OTHER_KIND
            for bk, bt, bc in b
        ]
        cur = [GAP * i] + [0] * m
        row = bytearray(m + 1)
        row[0] = 1
        for j in range(1, m + 1):
            best = prev[j - 1] + pair_cost[j - 1]
            move = 0
            right_only = cur[j - 1] + GAP
            if right_only > best:
                best, move = right_only, 2
            left_only = prev[j] + GAP
            if left_only > best:
                best, move = left_only, 1
            cur[j] = best
            row[j] = move
        trace.append(row)
        prev = cur
    pairs: list[tuple[int | None, int | None]] = []
    i, j = n, m
    while i or j:
        move = trace[i][j]
        if move == 0:
            i, j = i - 1, j - 1
            pairs.append((i, j))
        elif move == 1:
            i -= 1
            pairs.append((i, None))
        else:
            j -= 1
            pairs.append((None, j))
    pairs.reverse()
    return pairs


def common_start(left: list[tuple], right: list[tuple]) -> int:
    """How many keys the two lists share from their first: the rows the content alignment
    matches as they are, so the first difference it marks (and the evaluation's divergence) is here."""
    start = 0
    while start < len(left) and start < len(right) and left[start] == right[start]:
        start += 1
    return start


def align_steps(
    left: list[tuple], right: list[tuple], *, max_cells: int = ALIGN_MAX_CELLS
) -> list[tuple[int | None, int | None]] | None:
    """Content alignment of two lists of step keys: the common start and end matched as
    they are, the middle by Needleman-Wunsch. None when the middle's table would be over
    `max_cells` cells."""
    n, m = len(left), len(right)
    start = common_start(left, right)
    end = 0
    while end < n - start and end < m - start and left[n - 1 - end] == right[m - 1 - end]:
        end += 1
    middle_left, middle_right = left[start : n - end], right[start : m - end]
    if len(middle_left) * len(middle_right) > max_cells:
        return None
    pairs = [(i, i) for i in range(start)]
    for i, j in _needleman_wunsch(middle_left, middle_right):
        pairs.append((None if i is None else start + i, None if j is None else start + j))
    pairs += [(n - end + k, m - end + k) for k in range(end)]
    return pairs


def _blocks(rows: list[Row]) -> list[Block]:
    blocks: list[Block] = []
    run: list[Row] = []

    def flush():
        if len(run) >= FOLD_MIN:
            blocks.append(Block(rows=list(run), folded=True))
        elif run:
            _plain(run)
        run.clear()

    def _plain(more):
        if blocks and not blocks[-1].folded:
            blocks[-1].rows.extend(more)
        else:
            blocks.append(Block(rows=list(more)))

    for row in rows:
        if row.same:
            run.append(row)
        else:
            flush()
            _plain([row])
    flush()
    return blocks


def pair_view(
    left: list[dict], right: list[dict], *, align: Align = "content", max_cells: int = ALIGN_MAX_CELLS
) -> PairView:
    """Two trajectories' steps in rows, aligned by content (default) or by index."""
    lv, rv = step_views(left), step_views(right)
    left_keys, right_keys = [step_key(s) for s in left], [step_key(s) for s in right]
    note = ""
    pairs = None
    if align == "content":
        pairs = align_steps(left_keys, right_keys, max_cells=max_cells)
        if pairs is None:
            note = (
                f"These trajectories are too long to align by content ({len(left)} and {len(right)} steps): "
                "steps are aligned by index."
            )
    if pairs is None:
        pairs = [(i if i < len(lv) else None, i if i < len(rv) else None) for i in range(max(len(lv), len(rv)))]
    rows = []
    first = None
    for r, (i, j) in enumerate(pairs):
        same = i is not None and j is not None and left_keys[i] == right_keys[j]
        if not same and first is None:
            first = r
        rows.append(
            Row(
                index=r,
                left=None if i is None else lv[i],
                right=None if j is None else rv[j],
                first_difference=(r == first),
                same=same,
            )
        )
    return PairView(
        rows=rows,
        first_difference=first,
        left_steps=len(lv),
        right_steps=len(rv),
        align="content" if align == "content" and not note else "index",
        note=note,
        blocks=_blocks(rows),
    )


# What the agent was given --------------------------------------------------------------


@dataclass
class ToolView:
    name: str
    description: str = ""
    schema: str = ""  # the parameters' JSON schema, pretty-printed


@dataclass
class SetupView:
    """A trajectory's system prompt and declared tools (metadata `system_prompt`, `tools`)."""

    label: str
    system_prompt: str = ""
    tools: list[ToolView] = field(default_factory=list)


def tool_views(tools) -> list[ToolView]:
    """Declared tools in any of the shapes imports keep: OpenAI (`{"type": "function",
    "function": {...}}`), Anthropic (`input_schema`), OpenTelemetry (`parameters` at the top)."""
    if not isinstance(tools, list):
        return []
    out = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        spec = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        name = spec.get("name")
        schema = next((spec[k] for k in ("parameters", "input_schema", "json_schema") if k in spec), None)
        out.append(
            ToolView(
                name=name if isinstance(name, str) and name else "(unnamed tool)",
                description=spec.get("description") if isinstance(spec.get("description"), str) else "",
                schema=json.dumps(schema, indent=2, ensure_ascii=False, sort_keys=True) if schema is not None else "",
            )
        )
    return out


def setup_views(left_metadata: dict | None, right_metadata: dict | None) -> list[SetupView]:
    """What each side's agent was given: once when both sides had the same, else per side;
    empty when neither recorded a system prompt or tools."""

    def setup(metadata: dict | None, label: str) -> SetupView:
        metadata = metadata if isinstance(metadata, dict) else {}
        prompt = metadata.get("system_prompt")
        return SetupView(
            label=label,
            system_prompt=prompt if isinstance(prompt, str) else "",
            tools=tool_views(metadata.get("tools")),
        )

    left, right = setup(left_metadata, "Left"), setup(right_metadata, "Right")
    if (left.system_prompt, left.tools) == (right.system_prompt, right.tools):
        both = SetupView(label="Both sides", system_prompt=left.system_prompt, tools=left.tools)
        return [both] if both.system_prompt or both.tools else []
    return [left, right]
