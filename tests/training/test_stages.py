"""The stages of `training/` use only the stages below them (issue 30). The order is the loop's,
as the README's "Folders that show the loop" writes it: environments, policy, simulation
(scripted agents and simulated annotators), RL, evaluation, the loop's rounds, the run kinds,
the pipeline; the web layer and the commands sit on top and may read any of them. The models
and the metric vocabulary are shared by every stage (the contract's `ignore_imports`)."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The order is written once, as import-linter's "stages" contract in pyproject.toml.
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
STAGES = next(contract for contract in CONTRACTS if contract["id"] == "stages")
# Outside the order, on top of it: the web layer, the commands and Django's wiring.
TOP = {"web", "management", "urls", "apps", "admin", "migrations", "tasks"}


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _modules():
    for path in sorted((ROOT / "training").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        yield module, path


def test_the_import_contracts_hold():
    """The apps' layers, core's independence, ML code without Django and the training stages,
    as pyproject.toml's [tool.importlinter] writes them (`make lint` runs the same)."""
    lint_imports = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_every_module_of_training_has_a_place_in_the_order():
    """import-linter leaves a module in no layer unchecked: each stage of training is a layer of
    the contract, a shared module it names, or the top."""
    layers = {name.strip() for layer in STAGES["layers"] for name in layer.split(":")}
    shared = {rule.split("->")[1].strip().split(".")[1] for rule in STAGES.get("ignore_imports", [])}
    placed = layers | TOP | shared | {""}
    assert sorted({_stage(m) for m, _ in _modules()} - placed) == []


def test_no_private_name_is_imported_across_apps():
    """`from rewardmodel.train import _nothing` was one: a private helper is its module's own."""
    crossing = []
    for root in ("training", "rewardmodel", "annotate", "webapp"):
        for path in (ROOT / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    app = node.module.split(".")[0]
                    if app in ("training", "rewardmodel", "annotate", "webapp") and app != root:
                        crossing += [
                            f"{path.relative_to(ROOT)}: {node.module}.{a.name}"
                            for a in node.names
                            if a.name.startswith("_")
                        ]
    assert crossing == []
