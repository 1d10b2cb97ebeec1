"""URL converters. `<id:...>` is a row id: 1 to 18 digits, so it always fits a bigint.

Django's `<int:...>` takes any number of digits, and an id past 2**63 reached the
database as a value it cannot compare; such a path is now simply not a route (a 404).
"""

from __future__ import annotations


class IdConverter:
    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value) -> str:
        return str(int(value))
