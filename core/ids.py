"""Ids and indexes read from request data: one rule for every route, form and query string.

An id is a JSON integer, or text of ASCII digits only, within the range of the column it ends
up in. Nothing else is an id: not "²" or "٣" (`str.isdigit` is true for both, and `int` reads
"٣" as 3 and refuses "²"), not " 7" or "1.0" (which `int` and DRF's IntegerField accept), not
`true` (a bool is an int in Python), not 1.0. Every place that reads an id (DRF fields, query
strings, forms, pagination cursors, gold-set files) comes here, so they cannot disagree.
"""

from __future__ import annotations

import re

INT16_MAX = 2**15 - 1  # PostgreSQL smallint (PositiveSmallIntegerField)
INT32_MAX = 2**31 - 1  # PostgreSQL integer (PositiveIntegerField, IntegerField)
ID_MAX = 2**63 - 1  # PostgreSQL bigint (every primary key)

_INTEGER_TEXT = re.compile(r"-?[0-9]{1,19}")
_ASCII_DIGITS = re.compile(r"[0-9]+")


def ascii_digits(text) -> bool:
    """True for text of one or more ASCII digits, the only digits `int()` should be given from
    outside: `str.isdigit()` (and `isdecimal`, `isnumeric`) is also true for "²" and "٣", which
    `int()` refuses or reads as 3. Every such check in the code is this one (scripts/code_rules.py)."""
    return isinstance(text, str) and _ASCII_DIGITS.fullmatch(text) is not None


def integer_value(value, *, low: int, high: int) -> int | None:
    """A whole number sent as a JSON integer or as text of ASCII digits (an optional "-"), within
    low..high; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if not _INTEGER_TEXT.fullmatch(value):
            return None
        value = int(value)
    if not isinstance(value, int):
        return None
    return value if low <= value <= high else None


def parse_index(raw, *, limit: int = INT32_MAX) -> int | None:
    """A position written as text ("0", "12"): ASCII digits within 0..limit, else None."""
    if not isinstance(raw, str) or raw.startswith("-"):
        return None
    return integer_value(raw, low=0, high=limit)


def parse_id(raw) -> int | None:
    """A row id written as text ("12"): ASCII digits within 1..ID_MAX, else None."""
    if not isinstance(raw, str) or raw.startswith("-"):
        return None
    return integer_value(raw, low=1, high=ID_MAX)


def id_value(value) -> int | None:
    """A row id sent as a JSON integer or as text of ASCII digits, within 1..ID_MAX; else None."""
    return integer_value(value, low=1, high=ID_MAX)
