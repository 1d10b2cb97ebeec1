"""Gold comparisons: checks with a known answer, mixed into the queue at the campaign's gold rate.

Two ways in:
- an upload (JSONL or CSV), all or nothing: every bad line is named with its number and
  nothing is stored while one is bad. Each row is a pair and its expected verdict:
  `{"comparison": 12, "choice": 2}` for a comparison already in the campaign, or
  `{"trajectory_a": 40, "trajectory_b": 41, "choice": 2}` for any two stored trajectories
  of one task (the comparison is made if the campaign lacks it). `choice` is the 5-point
  scale in the row's own A/B terms (1: A much better ... 5: B much better);
- `gold_promote_adjudicated`: comparisons an admin adjudicated become gold with the
  adjudicated verdict, in one action.

Gold comparisons are checks, not data: their votes do not count against k, and dataset
snapshots leave them out.
"""

from __future__ import annotations

import csv
import io

from django.conf import settings
from django.db import transaction

from annotate.models import Campaign, Comparison, Trajectory
from core import json_input
from core.ids import parse_id
from core.problems import problem
from webapp.errors import ArbiterError

MAX_GOLD_ROWS = 10_000
MAX_GOLD_BYTES = settings.GOLD_MAX_UPLOAD_BYTES  # its routes refuse a larger body unread (webapp/uploads.py)
ROW_KEYS = {"comparison", "trajectory_a", "trajectory_b", "choice"}


def gold_upload_bytes(upload) -> bytes:
    """An uploaded gold file's bytes, its size checked before it is read (never more than the limit)."""
    if upload.size is not None and upload.size > MAX_GOLD_BYTES:
        raise ArbiterError(f"The gold file is {upload.size:,} bytes; the limit is {MAX_GOLD_BYTES:,}.")
    raw = upload.read(MAX_GOLD_BYTES + 1)
    if len(raw) > MAX_GOLD_BYTES:
        raise ArbiterError(f"The gold file is over the limit of {MAX_GOLD_BYTES:,} bytes.")
    return raw


def gold_rows_read(raw: bytes, *, filename: str = "") -> list[tuple[int, object]]:
    """(line number, decoded row) of a JSONL or CSV file; CSV when the name or first line says so."""
    if len(raw) > MAX_GOLD_BYTES:
        raise ArbiterError(f"The gold file is {len(raw):,} bytes; the limit is {MAX_GOLD_BYTES:,}.")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ArbiterError(f"The gold file is not UTF-8 text (byte {exc.start}).") from None
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        raise ArbiterError("The gold file is empty.")
    rows: list[tuple[int, object]] = []
    if filename.lower().endswith(".csv") or not first.startswith("{"):
        reader = csv.DictReader(io.StringIO(text))
        missing = {"choice"} - set(reader.fieldnames or [])
        if missing or not (
            {"comparison"} <= set(reader.fieldnames or [])
            or {"trajectory_a", "trajectory_b"} <= set(reader.fieldnames or [])
        ):
            raise ArbiterError(
                "A gold CSV has a header row with `choice` and either `comparison` or "
                f"`trajectory_a` and `trajectory_b`; found: {', '.join(reader.fieldnames or [])[:200]}."
            )
        for record in reader:
            rows.append((reader.line_num, {k: v for k, v in record.items() if k is not None and v not in (None, "")}))
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append((number, json_input.loads(line)))
            except json_input.JsonInputError as exc:
                rows.append((number, ValueError(str(exc))))
    if len(rows) > MAX_GOLD_ROWS:
        raise ArbiterError(f"The gold file has {len(rows):,} rows; the limit is {MAX_GOLD_ROWS:,}.")
    return rows


def _int(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 < value < 2**63 else None
    if isinstance(value, str):
        return parse_id(value.strip())
    return None


@transaction.atomic
def _gold_row(row) -> tuple[str, tuple]:
    """One row read: ("comparison", (id, choice)) or ("pair", (a, b, choice)) with a < b and the
    choice in id order; a ValueError says what is wrong with it."""
    if isinstance(row, ValueError):
        raise row
    if not isinstance(row, dict):
        raise ValueError("expected an object with choice and comparison (or trajectory_a and trajectory_b).")
    unknown = sorted(set(row) - ROW_KEYS)
    if unknown:
        raise ValueError(f"unknown keys: {', '.join(map(str, unknown))[:200]}.")
    choice = _int(row.get("choice"))
    if choice is None or not 1 <= choice <= 5:
        raise ValueError(
            f"choice must be 1-5 (1: A much better ... 5: B much better); got {str(row.get('choice'))[:40]!r}."
        )
    if "comparison" in row:
        cid = _int(row["comparison"])
        if cid is None or "trajectory_a" in row or "trajectory_b" in row:
            raise ValueError("give comparison (an id) or trajectory_a and trajectory_b, not both.")
        return "comparison", (cid, choice)
    a, b = _int(row.get("trajectory_a")), _int(row.get("trajectory_b"))
    if a is None or b is None:
        raise ValueError("trajectory_a and trajectory_b must be trajectory ids.")
    if a == b:
        raise ValueError("a trajectory cannot be compared with itself.")
    return "pair", (min(a, b), max(a, b), choice if a < b else 6 - choice)


def gold_import(*, campaign: Campaign, rows: list[tuple[int, object]]) -> dict:
    """Store the rows as gold in `campaign`, all or none; returns {marked, created}."""
    if not rows:
        raise ArbiterError("The gold file holds no rows.")
    problems: list[dict] = []
    by_comparison: list[tuple[int, int, int]] = []  # (line, comparison id, choice)
    by_pair: list[tuple[int, int, int, int]] = []  # (line, a, b, choice), a < b, choice in id order
    for line, row in rows:
        try:
            kind, value = _gold_row(row)
        except ValueError as exc:
            problems.append(problem(str(exc), line=line))
            continue
        (by_comparison if kind == "comparison" else by_pair).append((line, *value))
    in_campaign = set(
        Comparison.objects.filter(campaign=campaign, pk__in=[c for _, c, _ in by_comparison]).values_list(
            "pk", flat=True
        )
    )
    ids = {t for _, a, b, _ in by_pair for t in (a, b)}
    trajectories = {t["id"]: t for t in Trajectory.objects.filter(pk__in=ids).values("id", "task_id", "behaviour_hash")}
    existing = dict(
        ((a, b), pk)
        for pk, a, b in Comparison.objects.filter(
            campaign=campaign, trajectory_a_id__in=ids, trajectory_b_id__in=ids
        ).values_list("pk", "trajectory_a_id", "trajectory_b_id")
    )
    marks: dict[int, int] = {}  # comparison id -> gold choice
    for line, cid, choice in by_comparison:
        if cid in in_campaign:
            marks[cid] = choice
        else:
            problems.append(problem(f"campaign {campaign.name} has no comparison {cid}.", line=line))
    new: dict[tuple[int, int], Comparison] = {}
    for line, a, b, choice in by_pair:
        ta, tb = trajectories.get(a), trajectories.get(b)
        if ta is None or tb is None:
            problems.append(problem(f"no trajectory with id {a if ta is None else b}.", line=line))
        elif ta["task_id"] != tb["task_id"]:
            problems.append(problem(f"trajectories {a} and {b} answer different tasks.", line=line))
        elif ta["behaviour_hash"] and ta["behaviour_hash"] == tb["behaviour_hash"]:
            problems.append(
                problem(
                    f"trajectories {a} and {b} have the same steps and answer: there is nothing to judge.", line=line
                )
            )
        elif (a, b) in existing:
            marks[existing[(a, b)]] = choice
        else:
            new[(a, b)] = Comparison(
                campaign=campaign,
                task_id=ta["task_id"],
                trajectory_a_id=a,
                trajectory_b_id=b,
                is_gold=True,
                gold_choice=choice,
            )
    if problems:
        problems.sort(key=lambda p: p["line"])
        raise ArbiterError(f"Nothing was stored: {len(problems)} bad row(s).", details=problems[:100])
    for comparison_id, choice in marks.items():
        Comparison.objects.filter(pk=comparison_id).update(
            is_gold=True, gold_choice=choice, status=Comparison.Status.OPEN
        )
    Comparison.objects.bulk_create(new.values())
    return {"marked": len(marks), "created": len(new)}


@transaction.atomic
def gold_promote_adjudicated(*, campaign: Campaign, comparison_ids: list[int] | None = None) -> int:
    """Make the campaign's adjudicated comparisons (or those of `comparison_ids`) gold with
    the adjudicated verdict; returns how many became gold."""
    rows = Comparison.objects.filter(campaign=campaign, adjudicated_choice__isnull=False, is_gold=False)
    if comparison_ids is not None:
        rows = rows.filter(pk__in=comparison_ids)
    promoted = 0
    for comparison in rows.select_for_update():
        comparison.is_gold = True
        comparison.gold_choice = comparison.adjudicated_choice
        comparison.status = Comparison.Status.OPEN
        comparison.save(update_fields=["is_gold", "gold_choice", "status", "updated_at"])
        promoted += 1
    return promoted
