"""The project's own imports show its dependencies (issue 57): no two modules need each other,
the imports hidden inside functions do not grow, and each says why it is there
(scripts/import_graph.py counts and checks them)."""

from scripts.import_graph import cycles, imports, unexplained

# Function-level imports of project modules once every one without a reason was hoisted
# (benchmarks/RESULTS.md, issue 57). A new one must say why it cannot be at the top.
FUNCTION_LEVEL_IMPORTS_AT_MOST = 18


def test_no_two_modules_need_each_other():
    graph, _ = imports()
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_hidden_in_functions_do_not_grow():
    _, lazy = imports()
    assert len(lazy) <= FUNCTION_LEVEL_IMPORTS_AT_MOST, (
        f"{len(lazy)} function-level imports of project modules (at most {FUNCTION_LEVEL_IMPORTS_AT_MOST}): "
        "import at the top, or break the cycle that keeps it lazy"
    )


def test_every_import_in_a_function_says_why():
    _, lazy = imports()
    missing = unexplained(lazy)
    assert missing == [], "function-level imports with no `# Lazy: <reason>` comment above: " + ", ".join(
        f"{module}:{line} -> {target}" for module, line, target in missing
    )


def test_the_reason_checker_wants_the_comment_right_above_the_block():
    lines = [
        "def f():",  # 1
        "    # Lazy: b loads torch.",  # 2
        "    from a import b",  # 3
        "    from a import c",  # 4
        "    x = 1",  # 5
        "    from a import d",  # 6
        "    # Some other note.",  # 7
        "    from a import e",  # 8
    ]
    lazy = [("m", n, "a") for n in (3, 4, 6, 8)]
    assert unexplained(lazy, {"m": lines}) == [("m", 6, "a"), ("m", 8, "a")]
