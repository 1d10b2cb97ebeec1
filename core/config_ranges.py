"""Ranges of a config's numbers, checked in one place: each problem starts with its field
("hidden: between 8 and 4,096; got -5."), as every config's `validate()` reports them, so the
launch form puts it beside the field and the API lists it. Plain Python: ML code uses it too."""

from __future__ import annotations


def out_of_range(config, ranges: dict[str, tuple[float, float]]) -> list[str]:
    """A problem for every field of `config` outside its inclusive (low, high)."""
    problems = []
    for name, (low, high) in ranges.items():
        value = getattr(config, name)
        if value is None or isinstance(value, bool):
            continue
        if not low <= value <= high:  # NaN is in no range
            problems.append(f"{name}: between {_number(low)} and {_number(high)}; got {_number(value)}.")
    return problems


def _number(value) -> str:
    """An integer in full with thousands separators (10,000,000, not 1e+07); other numbers short."""
    return f"{value:,}" if isinstance(value, int) else f"{value:,g}"
