"""Rules on the code itself, for bug classes that came back in new code after being fixed where
they were found (issues 45 and 46); `make lint` runs them, and so does the suite
(tests/test_code_rules.py). Each names the shared function to use instead.

- `str.isdigit()` alone: true for "²", "٣" and "½"-like digits that `int()` then refuses (a 500
  on request data, a crashed episode on a policy's output). Pair it with `isascii()` on the same
  line, or read ids with `core.ids.parse_id` / `parse_index`.
- `serializers.IntegerField(`: DRF's reads `true` as 1, "٣" as 3 and " 7" or "1.0" as numbers.
  The API's integer fields are `webapp.api_input.WholeNumberField` (or `IdField`, `Int32Field`),
  which read by `core.ids`.
- A collective of torch.distributed (`all_reduce`, `all_gather`, `broadcast`, ...) or
  `DistributedDataParallel` outside core/ranks.py: data-parallel training was written three
  ways; the training loops share one mechanism, `core.ranks.Ranks` (the reward model's is
  TRL's, inside its trainer).
- A function of the apps over 100 lines: split it into steps with names (issue 46).
- A status passed by position to Django's `render()` (its 4th argument is the content type):
  `render(request, template, context, 403)` answered 200 with `Content-Type: 403` (issue 53).
  Pass `status=` by name; `TemplateResponse` (4th), `SimpleTemplateResponse` (3rd) and
  `HttpResponse` and its kin (2nd) take the content type by position too.

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
COLLECTIVE = re.compile(
    r"\b(all_reduce|all_gather(_object)?|reduce_scatter|broadcast(_object_list)?|DistributedDataParallel)\b"
)
RANKS_HOME = Path("core/ranks.py")
APPS = ("core", "annotate", "webapp", "rewardmodel", "training")
LONGEST_FUNCTION = 100


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


def collectives(source: str) -> list[int]:
    """Lines that name a torch.distributed collective or DistributedDataParallel."""
    return [n for n, line in enumerate(source.splitlines(), 1) if COLLECTIVE.search(line)]


def long_functions(source: str) -> list[int]:
    """The first lines of functions over LONGEST_FUNCTION lines (docstring and decorators' lines
    not counted before `def`)."""
    import ast

    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > LONGEST_FUNCTION
    ]


# The positional arguments each takes before the content type, where a status would land.
CONTENT_TYPE_AT = {
    "render": 3,
    "TemplateResponse": 3,
    "SimpleTemplateResponse": 2,
    "HttpResponse": 1,
    "StreamingHttpResponse": 1,
    "FileResponse": 1,
}


def positional_content_types(source: str) -> list[int]:
    """Lines that call render() (or a response class) with an argument in its content type's
    position: a status meant for `status=`. Methods (`widget.render(...)`) are not Django's."""
    import ast

    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in CONTENT_TYPE_AT
        and len(node.args) > CONTENT_TYPE_AT[node.func.id]
    ]


RULES = {
    "str.isdigit() is true for '²' and '٣', which int() refuses: use s.isascii() and s.isdigit(), "
    "or core.ids.parse_id / parse_index": bare_isdigit,
    "DRF's IntegerField reads true as 1 and '٣' as 3: use webapp.api_input.WholeNumberField, "
    "IdField or Int32Field": drf_integer_fields,
    "a data-parallel collective outside core/ranks.py: use core.ranks.Ranks (total, any, gather, "
    "sum_gradients), the one mechanism of the training loops": collectives,
    f"a function over {LONGEST_FUNCTION} lines: split it into named steps": long_functions,
    "an argument in render()'s content-type position (its 4th; a response class's 2nd): pass status= by "
    "name": positional_content_types,
}
EXEMPT = {drf_integer_fields: {WHOLE_NUMBER_HOME}, collectives: {RANKS_HOME}}
ONLY_IN = {long_functions: APPS}  # benchmarks' and scripts' `main`s read top to bottom


def broken_rules() -> dict[str, dict[str, list[int]]]:
    """{rule: {file: [line, ...]}} for every rule some file breaks."""
    found: dict[str, dict[str, list[int]]] = {}
    for path in python_files():
        relative = path.relative_to(ROOT)
        if relative == Path("scripts/code_rules.py"):
            continue
        source = path.read_text(encoding="utf-8")
        for rule, check in RULES.items():
            if relative in EXEMPT.get(check, ()) or relative.parts[0] not in ONLY_IN.get(check, APP_FOLDERS):
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
