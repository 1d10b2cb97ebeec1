"""A problem with input: the one shape that forms, the API, imports and run checks report.

A problem is a message, with the field it is about (`"pool[2]"`, `"dimensions.0.name"`) or the
line of a file where there is one. Services raise `webapp.errors.ArbiterError(message,
details=[problem(...), ...])`; the API lists them as `errors` (`webapp.api_errors`), a form puts
each under its field (`form_field`), a page or a command prints them (`problems_text`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Required, TypedDict


class Problem(TypedDict, total=False):
    message: Required[str]
    field: str
    line: int


def problem(message: str, *, field: str | None = None, line: int | None = None) -> Problem:
    """A problem with input; `field` is kept whenever it is given, even empty (a setting named "")."""
    out: Problem = {"message": str(message)}
    if field is not None:
        out["field"] = field
    if line is not None:
        out["line"] = line
    return out


def problem_of(item: Mapping | str) -> Problem:
    """A problem from what older code and stored records hold: a bare string, or a mapping whose
    text is under `message`, `error` (an import's stored errors) or `problem`."""
    if isinstance(item, str):
        return problem(item)
    text = item.get("message") or item.get("error") or item.get("problem") or ""
    line = item.get("line")
    field = item.get("field")
    return problem(str(text), field=None if field is None else str(field), line=line if isinstance(line, int) else None)


def form_field(item: Mapping | str) -> str:
    """The form field a problem belongs to: `pool[2]` and `dimensions.0.name` are about `pool` and
    `dimensions`; a problem without a field is about the whole form (`__all__`)."""
    return problem_of(item).get("field", "").split("[")[0].split(".")[0] or "__all__"


def problem_text(item: Mapping | str) -> str:
    item = problem_of(item)
    if item.get("field"):
        return f"{item['field']}: {item['message']}"
    if item.get("line") is not None:
        return f"line {item['line']}: {item['message']}"
    return item["message"]


def problems_text(problems: Iterable[Mapping | str], *, limit: int = 3) -> str:
    """The first `limit` problems in one sentence, and how many more there are."""
    problems = list(problems)
    more = f" (and {len(problems) - limit} more)" if len(problems) > limit else ""
    return "; ".join(problem_text(p) for p in problems[:limit]) + more
