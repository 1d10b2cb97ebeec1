"""Rules on the code itself, for bug classes that came back in new code after being fixed where
they were found (issues 45, 46, 53 and 57); `make lint` runs them, and so does the suite
(tests/test_code_rules.py, which also holds the escapes each rule was once blind to). Each rule
reads the parsed code (Python's `ast`; comments through `tokenize`), not lines of text, and names
the shared function to use instead.

- A digit check (`.isdigit()`, `.isdecimal()`, `.isnumeric()`, as a method or as `str.isdigit(s)`)
  outside core/ids.py: each is true for "²" and "٣", which `int()` then refuses or reads as 3
  (a 500 on request data, a crashed episode on a policy's output). Use `core.ids.ascii_digits`,
  or read ids with `core.ids.parse_id` / `parse_index`.
- `int()` of request data (`request.GET[...]`, `.POST`, `.query_params`, `.data`, `.headers`,
  `.META`, `.COOKIES`): a 500 on "x" and 3 on "٣". Use `core.ids` or `webapp.api_input.query_id`.
- An integer field of DRF (`serializers.IntegerField`, or `IntegerField` imported from
  rest_framework) or of Django's forms (`forms.IntegerField`): both read `" 7"`, "1.0" and "٣"
  as numbers (DRF also `true` as 1). The API's are `webapp.api_input.WholeNumberField` (or
  `IdField`, `Int32Field`); the forms' is `webapp.form_input.WholeNumberFormField`.
- A collective of torch.distributed (`all_reduce`, `reduce`, `all_to_all`, `broadcast`, ...,
  however the module is named) or `DistributedDataParallel` outside core/ranks.py: data-parallel
  training was written three ways; the training loops share one mechanism, `core.ranks.Ranks`
  (the reward model's is TRL's, inside its trainer).
- A function of the apps over 100 lines: split it into steps with names (issue 46).
- A status passed by position to Django's `render()` (its 4th argument is the content type):
  `render(request, template, context, 403)` answered 200 with `Content-Type: 403` (issue 53).
  Pass `status=` by name; `TemplateResponse` (4th), `SimpleTemplateResponse` (3rd) and
  `HttpResponse` and its kin (2nd) take the content type by position too.
- A problem with input written as a dict (`{"field": ..., "message": ...}`, with or without
  "line") outside core/problems.py: 65 were built by hand beside `core.problems.problem()`,
  which the forms, the API and the commands all read. Call `problem(message, field=...)`.
- A run's lineage link built as a dict (`{"type", "id", "label", "url"}`) outside
  webapp/runs/lineage.py: it was written by hand 18 times. Call `lineage_link(...)`.
- The rubric's utility written out (a count of tool errors times a weight) outside
  training/envs/utility.py: it was copied into three environments and the simulated annotators.
  Call `training.envs.utility.utility` or `episode_utility`.
- An import of another package's private module (`from httpx2._utils import ...`): the judge
  client reached into httpx2 twice. Use the package's public interface (or, in a test that
  checks we match it, say so: the rule does not read tests).
- A policy saved with `save_pretrained` in training/ outside training/policy/checkpoints.py:
  saving a checkpoint was written four ways (behaviour cloning, RL, expert iteration, SFT/DPO),
  one of which could drop the policy's tool parser. Call `write_checkpoint` (or `save_policy`).
- An import-linter `ignore_imports` entry in pyproject.toml with no comment above it (or on its
  line) saying why the contract allows that import.
- A checker silenced: `# fmt: skip` / `# fmt: off` anywhere, or a `# noqa` or `# type: ignore`
  without its codes and a reason after them (`# noqa: BLE001 - why`). A rule met by silencing
  its checker is not met.

    python scripts/code_rules.py     # prints each place and exits 1 if there is one
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP_FOLDERS = ("arbiter", "core", "annotate", "webapp", "rewardmodel", "training", "benchmarks", "scripts", "tests")
APPS = ("arbiter", "core", "annotate", "webapp", "rewardmodel", "training")
LONGEST_FUNCTION = 100

DIGIT_CHECKS = {"isdigit", "isdecimal", "isnumeric"}
IDS_HOME = Path("core/ids.py")
REQUEST_DATA = {"GET", "POST", "query_params", "data", "headers", "META", "COOKIES", "FILES"}
INTEGER_FIELD_HOMES = {Path("webapp/api_input.py"), Path("webapp/form_input.py")}
COLLECTIVES = {
    "all_reduce",
    "reduce",
    "all_gather",
    "all_gather_object",
    "all_gather_into_tensor",
    "gather",
    "gather_object",
    "scatter",
    "scatter_object_list",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "broadcast",
    "broadcast_object_list",
    "send",
    "recv",
    "isend",
    "irecv",
    "barrier",
}
RANKS_HOME = Path("core/ranks.py")


def python_files():
    for folder in APP_FOLDERS:
        yield from (ROOT / folder).rglob("*.py")


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for a Name or an Attribute chain of names, else ""."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def digit_checks(source: str) -> list[int]:
    """Lines that call a digit check of `str`, as a method (`s.isdigit()`) or through the type
    (`str.isdecimal(s)`), whatever else the line checks."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DIGIT_CHECKS
    )


def _reads_request(node: ast.AST) -> bool:
    """Whether an expression reads request data: `request.GET[...]`, `self.request.data.get(...)`."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Attribute) and inner.attr in REQUEST_DATA:
            owner = _dotted(inner.value)
            if owner == "request" or owner.endswith(".request"):
                return True
    return False


def request_ints(source: str) -> list[int]:
    """Lines that give `int()` something read from a request."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "int"
        and any(_reads_request(arg) for arg in node.args)
    )


def integer_fields(source: str) -> list[int]:
    """Lines that name DRF's or Django forms' IntegerField (`serializers.IntegerField`,
    `forms.IntegerField`, `fields.IntegerField`, or the name imported from either). A model's
    `models.IntegerField` is not a reader of request data."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("rest_framework",):
            lines += [node.lineno for alias in node.names if alias.name == "IntegerField"]
        elif isinstance(node, ast.ImportFrom) and node.module in ("django.forms", "django.forms.fields"):
            lines += [node.lineno for alias in node.names if alias.name == "IntegerField"]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "IntegerField"
            and _dotted(node.value).split(".")[-1] in ("serializers", "forms", "fields")
        ):
            lines.append(node.lineno)
    return sorted(lines)


def collectives(source: str) -> list[int]:
    """Lines that use a torch.distributed collective or DistributedDataParallel, however
    torch.distributed is named (`dist`, `torch.distributed`, `import torch.distributed as d`,
    `from torch.distributed import all_to_all`)."""
    tree = ast.parse(source)
    modules = {"torch.distributed", "dist"}  # `dist`: the name everyone gives it
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.asname for alias in node.names if alias.name == "torch.distributed" and alias.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "torch":
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == "distributed"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("torch.distributed"):
            names = COLLECTIVES | {"DistributedDataParallel"}
            lines += [node.lineno for alias in node.names if alias.name in names]
        elif isinstance(node, ast.ImportFrom) and node.module == "torch.nn.parallel":
            lines += [node.lineno for alias in node.names if alias.name == "DistributedDataParallel"]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in COLLECTIVES and _dotted(node.value) in modules:
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "DistributedDataParallel":
            lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id == "DistributedDataParallel":
            lines.append(node.lineno)
    return sorted(set(lines))


def long_functions(source: str) -> list[int]:
    """The first lines of functions over LONGEST_FUNCTION lines (docstring and decorators' lines
    not counted before `def`)."""
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
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in CONTENT_TYPE_AT
        and len(node.args) > CONTENT_TYPE_AT[node.func.id]
    ]


PROBLEM_KEYS = ({"field", "message"}, {"line", "message"}, {"field", "line", "message"})
PROBLEMS_HOME = Path("core/problems.py")


def problem_dicts(source: str) -> list[int]:
    """Lines that write a problem as a dict literal rather than calling core.problems.problem."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Dict)
        and node.keys
        and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys)
        and {k.value for k in node.keys} in PROBLEM_KEYS
        and len(node.keys) == len({k.value for k in node.keys})
        and not any(isinstance(v, ast.Dict) for v in node.values)  # a JSON schema's properties
    )


LINEAGE_HOME = Path("webapp/runs/lineage.py")
LINK_KEYS = {"type", "id", "label", "url"}


def lineage_dicts(source: str) -> list[int]:
    """Lines that write a lineage link as a dict literal."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Dict)
        and LINK_KEYS <= {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    )


UTILITY_HOME = Path("training/envs/utility.py")


def _names(node: ast.AST) -> str:
    """What a term counts: `episode.tool_errors`, `outcome["steps"]`, `outcome.get("loop")` -> the key."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        return str(node.args[0].value)
    return _dotted(node).split(".")[-1]


def _weighed(node: ast.AST) -> set[str]:
    """The counts a sum weighs (`w * count` terms of an Add/Sub chain)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return _weighed(node.left) | _weighed(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return {_names(node.left), _names(node.right)}
    return set()


def utility_formulas(source: str) -> list[int]:
    """Lines that weigh tool errors together with steps (or calls, or a loop) in one sum:
    `10.0 * correct - 1.0 * episode.calls - 5.0 * episode.tool_errors`, the rubric's utility
    written out again. (A penalty on tool errors alone, RL's shaping, is not the rubric.)"""
    return sorted(
        {
            node.lineno
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.BinOp)
            and "tool_errors" in (weighed := _weighed(node))
            and weighed & {"steps", "calls", "loop"}
        }
    )


OUR_PACKAGES = {"core", "annotate", "webapp", "rewardmodel", "training", "benchmarks", "scripts", "tests"}


def _private(module: str) -> bool:
    parts = module.split(".")
    return parts[0] not in OUR_PACKAGES and any(p.startswith("_") and not p.startswith("__") for p in parts)


def private_imports(source: str) -> list[int]:
    """Lines that import a private module of a package not ours (`httpx2._utils`)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _private(node.module):
            lines.append(node.lineno)
        elif isinstance(node, ast.Import) and any(_private(alias.name) for alias in node.names):
            lines.append(node.lineno)
    return sorted(lines)


CHECKPOINTS_HOME = Path("training/policy/checkpoints.py")


def policy_saves(source: str) -> list[int]:
    """Lines that call `save_pretrained` (a model's or a tokenizer's)."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "save_pretrained"
    )


FORMATTER_OFF = re.compile(r"#\s*fmt:\s*(skip|off)\b")
NOQA = re.compile(r"#\s*noqa\b(?P<rest>.*)", re.IGNORECASE)
NOQA_WITH_REASON = re.compile(r"^:\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*\s*[-(:–]\s*\S.*")
TYPE_IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<rest>.*)")
TYPE_IGNORE_WITH_REASON = re.compile(r"^\[[\w-]+(\s*,\s*[\w-]+)*\]\s*[-(:–]\s*\S.*")


def silenced_checkers(source: str) -> list[int]:
    """Lines whose comment turns the formatter off, or silences the linter or a type checker
    without codes and a reason (`# noqa: E402` alone; `# noqa: E402 - why` and
    `# type: ignore[attr-defined] - why` are decisions someone can read)."""
    lines = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        noqa, ignored = NOQA.search(token.string), TYPE_IGNORE.search(token.string)
        if (
            FORMATTER_OFF.search(token.string)
            or (noqa and not NOQA_WITH_REASON.match(noqa["rest"].strip()))
            or (ignored and not TYPE_IGNORE_WITH_REASON.match(ignored["rest"].strip()))
        ):
            lines.append(token.start[0])
    return lines


RULES = {
    "a digit check of str (isdigit, isdecimal, isnumeric) is true for '²' and '٣', which int() refuses: "
    "use core.ids.ascii_digits, parse_id or parse_index": digit_checks,
    "int() of request data is a 500 on 'x' and 3 on '٣': read it with core.ids (parse_id, parse_index) "
    "or webapp.api_input.query_id": request_ints,
    "an IntegerField of DRF or Django's forms reads ' 7', '1.0' and '٣' as numbers: use "
    "webapp.api_input.WholeNumberField (IdField, Int32Field) or webapp.form_input.WholeNumberFormField": integer_fields,
    "a data-parallel collective outside core/ranks.py: use core.ranks.Ranks (total, any, gather, "
    "sum_gradients), the one mechanism of the training loops": collectives,
    f"a function over {LONGEST_FUNCTION} lines: split it into named steps": long_functions,
    "an argument in render()'s content-type position (its 4th; a response class's 2nd): pass status= by "
    "name": positional_content_types,
    "a problem written as a dict: call core.problems.problem(message, field=..., line=...)": problem_dicts,
    "a lineage link written as a dict: call webapp.runs.lineage.lineage_link": lineage_dicts,
    "the rubric's utility written out: call training.envs.utility.utility or episode_utility": utility_formulas,
    "an import of another package's private module: use its public interface": private_imports,
    "a policy saved with save_pretrained: call training.policy.checkpoints.write_checkpoint, the one way a "
    "checkpoint is written": policy_saves,
    "a checker silenced (fmt: skip/off, or noqa or type: ignore without its codes and a reason): make the code fit the "
    "rule, or say why it cannot after the codes": silenced_checkers,
}
EXEMPT = {
    digit_checks: {IDS_HOME},
    integer_fields: INTEGER_FIELD_HOMES,
    collectives: {RANKS_HOME},
    problem_dicts: {PROBLEMS_HOME},
    utility_formulas: {UTILITY_HOME},
    lineage_dicts: {LINEAGE_HOME},
    policy_saves: {CHECKPOINTS_HOME},
}
# benchmarks' and scripts' `main`s read top to bottom; the tests hold the rules' own examples.
ONLY_IN = {long_functions: APPS, policy_saves: ("training",)}
NOT_IN_TESTS = {
    digit_checks,
    request_ints,
    integer_fields,
    collectives,
    positional_content_types,
    problem_dicts,
    utility_formulas,
    lineage_dicts,
    private_imports,
}


def _applies(check, relative: Path) -> bool:
    if relative in EXEMPT.get(check, ()):
        return False
    if check in NOT_IN_TESTS and relative.parts[0] == "tests":
        return False
    return relative.parts[0] in ONLY_IN.get(check, APP_FOLDERS)


def unexplained_ignores(toml_text: str) -> list[int]:
    """Lines of `ignore_imports` entries that no comment explains: a group of entries needs a
    comment line above it, or each entry one on its line."""
    lines, inside, explained = [], False, False
    for number, line in enumerate(toml_text.splitlines(), 1):
        text = line.strip()
        if text.startswith("ignore_imports") and text.endswith("["):
            inside, explained = True, False
        elif inside and text.startswith("]"):
            inside = False
        elif inside and text.startswith("#"):
            explained = True
        elif inside and text and not explained and "#" not in text:
            lines.append(number)
    return lines


IGNORES_RULE = "an import-linter ignore_imports entry without a comment saying why"


def broken_rules() -> dict[str, dict[str, list[int]]]:
    """{rule: {file: [line, ...]}} for every rule some file breaks."""
    found: dict[str, dict[str, list[int]]] = {}
    for path in python_files():
        relative = path.relative_to(ROOT)
        if relative == Path("scripts/code_rules.py"):
            continue
        source = path.read_text(encoding="utf-8")
        for rule, check in RULES.items():
            if _applies(check, relative) and (lines := check(source)):
                found.setdefault(rule, {})[str(relative)] = lines
    if lines := unexplained_ignores((ROOT / "pyproject.toml").read_text(encoding="utf-8")):
        found.setdefault(IGNORES_RULE, {})["pyproject.toml"] = lines
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
