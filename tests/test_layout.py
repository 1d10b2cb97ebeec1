"""The suite's own layout: no module under tests/ imports a test file, so that each test file can be
run, moved or renamed alone. What several test files share lives in tests/helpers.py (builders,
constants, environments) or in a folder's conftest.py (fixtures)."""

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
# A whole string that names a module, or a class in one, by dotted path: how a run config or a
# setting names an environment ("tests.helpers:Counter"), which imports that module when it runs.
DOTTED_PATH = re.compile(r"tests(?:\.\w+)+(?::\w+)?")


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def enclosing_test_file(name: str) -> str | None:
    """The test module that the dotted `name` is, or is inside of; None if it names none."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part.startswith("test_"):
            return ".".join(parts[: i + 1])
    return None


def imported_test_files(source: str, module: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, what) for each import of another test module in `source`, the source of `module`:
    `import`, `from ... import`, relative or not, at the top or inside a function, and a string
    that is a dotted path into one."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED_PATH.fullmatch(node.value):
            names = [node.value.split(":")[0]]
        else:
            continue
        targets = {enclosing_test_file(name) for name in names} - {None, module}
        found += [(node.lineno, target) for target in sorted(targets)]
    return sorted(found)


def test_the_check_finds_every_way_of_importing_a_test_file_and_allows_the_shared_places():
    source = """
import tests.annotate.test_exports
from tests.annotate.test_assignments import make_campaign
from tests.annotate import test_exports as exports, dataset_fixtures
from .test_trajectory_view import START
from .. import helpers
from tests.helpers import Built, make_campaign
from tests.conftest import token_client
from tests.annotate.dataset_fixtures import voted_campaign


def later():
    from tests.webapp.test_hostile_input import RAW_BODIES


ENVIRONMENT = "tests.training.test_envs:Counter"
OWN = "tests.annotate.test_views:Mine"
SHARED = "tests.helpers:Catalog"
PROSE = "like tests.webapp.test_runs, said in a sentence"
"""
    found = imported_test_files(source, module_of(TESTS / "annotate" / "test_views.py"))
    # Named below without "tests.": a whole dotted path in a string here would be an import itself.
    assert [(line, target.removeprefix("tests.")) for line, target in found] == [
        (2, "annotate.test_exports"),
        (3, "annotate.test_assignments"),
        (4, "annotate.test_exports"),
        (5, "annotate.test_trajectory_view"),
        (13, "webapp.test_hostile_input"),
        (16, "training.test_envs"),
    ]


def test_no_module_under_tests_imports_a_test_file():
    modules = sorted(TESTS.rglob("*.py"))
    assert sum(path.name.startswith("test_") for path in modules) > 100  # the whole suite was read
    found = {}
    for path in modules:
        imported = imported_test_files(path.read_text(), module_of(path), is_package=path.name == "__init__.py")
        if imported:
            found[str(path.relative_to(ROOT))] = [f"line {line}: {target}" for line, target in imported]
    assert found == {}, (
        "these import from a test file; move what they share to tests/helpers.py (a fixture to the "
        "folder's conftest.py) and import it from there"
    )


APPS = ("webapp", "annotate", "rewardmodel", "training")
WIRING = ("settings.py", "wsgi.py", "celery.py", "asgi.py")


def test_every_app_has_the_same_anatomy_and_only_the_wiring_package_wires():
    """Each app: apps.py, models.py, migrations/, urls.py (its routes, mounted by arbiter/urls.py).
    The project's settings, WSGI entry point and Celery app live only in arbiter/."""
    for app in APPS:
        missing = [
            name
            for name in ("apps.py", "models.py", "migrations/__init__.py", "urls.py")
            if not (ROOT / app / name).is_file()
        ]
        assert not missing, f"{app} lacks {missing}"
        assert not [name for name in WIRING if (ROOT / app / name).exists()], f"{app} holds project wiring"
    assert all((ROOT / "arbiter" / name).is_file() for name in ("settings.py", "urls.py", "celery.py", "wsgi.py"))
    mounted = (ROOT / "arbiter" / "urls.py").read_text()
    assert all(f'include("{app}.urls")' in mounted for app in APPS)
