"""Rules on the code itself, for bug classes that came back in new code after being fixed where
they were found (issues 45 and 46); `make lint` runs them, and so does the suite
(tests/test_code_rules.py). Each names the shared function to use instead.

- `str.isdigit()` alone: true for "²", "٣" and "½"-like digits that `int()` then refuses (a 500
  on request data, a crashed episode on a policy's output). Pair it with `isascii()` on the same
  line, or read ids with `core.ids.parse_id` / `parse_index`.
- `serializers.IntegerField(`: DRF's reads `true` as 1, "٣" as 3 and " 7" or "1.0" as numbers.
  The API's integer fields are `webapp.api_input.WholeNumberField` (or `IdField`, `Int32Field`),
  which read by `core.ids`.

    python scripts/code_rules.py     # prints each place and exits 1 if there is one
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP_FOLDERS = ("core", "annotate", "webapp", "rewardmodel", "training", "benchmarks", "scripts")
BARE_ISDIGIT = re.compile(r"\.isdigit\(\)")
DRF_INTEGER = re.compile(r"serializers\.IntegerField\(")
WHOLE_NUMBER_HOME = Path("webapp/api_input.py")


def python_files():
    for folder in APP_FOLDERS:
        yield from (ROOT / folder).rglob("*.py")


def bare_isdigit(source: str) -> list[int]:
    """Lines that call `.isdigit()` without `.isascii()` on the same line."""
    return [
        n for n, line in enumerate(source.splitlines(), 1) if BARE_ISDIGIT.search(line) and ".isascii()" not in line
    ]


def drf_integer_fields(source: str) -> list[int]:
    """Lines that build DRF's own IntegerField."""
    return [n for n, line in enumerate(source.splitlines(), 1) if DRF_INTEGER.search(line)]


RULES = {
    "str.isdigit() is true for '²' and '٣', which int() refuses: use s.isascii() and s.isdigit(), "
    "or core.ids.parse_id / parse_index": bare_isdigit,
    "DRF's IntegerField reads true as 1 and '٣' as 3: use webapp.api_input.WholeNumberField, "
    "IdField or Int32Field": drf_integer_fields,
}
EXEMPT = {drf_integer_fields: {WHOLE_NUMBER_HOME}}


def broken_rules() -> dict[str, dict[str, list[int]]]:
    """{rule: {file: [line, ...]}} for every rule some file breaks."""
    found: dict[str, dict[str, list[int]]] = {}
    for path in python_files():
        relative = path.relative_to(ROOT)
        if relative == Path("scripts/code_rules.py"):
            continue
        source = path.read_text(encoding="utf-8")
        for rule, check in RULES.items():
            if relative in EXEMPT.get(check, ()):
                continue
            if lines := check(source):
                found.setdefault(rule, {})[str(relative)] = lines
    return found


def main() -> int:
    found = broken_rules()
    for rule, places in found.items():
        for path, lines in places.items():
            for line in lines:
                print(f"{path}:{line}: {rule}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
