"""The project's own imports, read from the parsed code: how many sit inside functions, and the
cycles among modules once those are counted (a lazy import hides a dependency; a cycle is two
modules that each need the other).

    python scripts/import_graph.py [--list]    # the counts; --list names each cycle and each lazy import

A function-level import is one of the project's modules (core, webapp, annotate, rewardmodel,
training) imported in a function's body. Each says why it cannot be at the top, in a comment
`# Lazy: <reason>` right above it (or above the block of imports it is part of). A cycle is a strongly connected group of modules in
the graph of every project import, module-level and function-level; a package's __init__ counts
as the package.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("arbiter", "core", "webapp", "annotate", "rewardmodel", "training")


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _targets(node: ast.AST, modules: set[str]) -> list[str]:
    """The project modules an import statement names (`from a.b import c` is a.b.c when that is a
    module, else a.b)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names = [f"{node.module}.{alias.name}" for alias in node.names]
        names = [name if name in modules else node.module for name in names]
    else:
        return []
    found = []
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name.split(".")[0] in PACKAGES:
            found.append(name)
    return found


def imports() -> tuple[dict[str, set[str]], list[tuple[str, int, str]]]:
    """(graph: module -> modules it imports anywhere, lazy: (module, line, target) of each
    function-level import)."""
    paths = {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    paths = {m: p for m, p in paths.items() if ".migrations." not in f".{m}."}
    modules = set(paths)
    graph: dict[str, set[str]] = defaultdict(set)
    lazy = []
    for module, path in sorted(paths.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(function):
                    for target in _targets(node, modules):
                        if target != module:
                            lazy.append((module, node.lineno, target))
        for node in ast.walk(tree):
            graph[module].update(t for t in _targets(node, modules) if t != module)
    return graph, sorted(set(lazy))


REASON = "# Lazy:"


def unexplained(
    lazy: list[tuple[str, int, str]], sources: dict[str, list[str]] | None = None
) -> list[tuple[str, int, str]]:
    """The function-level imports with no `# Lazy:` reason right above them or above their block
    of consecutive imports (`sources`: module -> its lines, read from the tree when not given)."""
    found, sources = [], dict(sources or {})
    for module, line, target in lazy:
        if module not in sources:
            path = ROOT / Path(*module.split("."))
            path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
            sources[module] = path.read_text(encoding="utf-8").splitlines()
        lines = sources[module]
        above = line - 2
        while above >= 0 and lines[above].strip().startswith(("from ", "import ")):
            above -= 1
        if above < 0 or not lines[above].strip().startswith(REASON):
            found.append((module, line, target))
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="name each cycle and each function-level import")
    args = parser.parse_args()
    graph, lazy = imports()
    groups = cycles(graph)
    print(f"function-level imports of project modules: {len(lazy)}, {len(unexplained(lazy))} without a reason")
    print(
        f"import cycles (groups of modules that need each other): {len(groups)}, "
        f"{sum(len(g) for g in groups)} modules in them"
    )
    if args.list:
        for group in groups:
            print("cycle:", " ".join(group))
        missing = set(unexplained(lazy))
        for module, line, target in lazy:
            print(
                f"lazy: {module}:{line} -> {target}"
                + ("  (no `# Lazy:` reason)" if (module, line, target) in missing else "")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
