"""The stages of `training/` use only the stages below them (issue 30). The order is the loop's,
as the README's "Folders that show the loop" writes it: environments, policy, simulation
(scripted agents and simulated annotators), RL, evaluation, the loop's rounds, the run kinds,
the pipeline; the web layer and the commands sit on top and may read any of them.
A few plain modules are shared by every stage and import none: the models, the config ranges,
the metric vocabulary and the data-parallel launcher."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES = [
    "envs",
    "policy",
    "simulation",
    "simulated_annotators",
    "simulated_corrections",
    "rl",
    "finetune",
    "evaluation",
    "judges",
    "loop",
    "run_kinds",
    "pipeline",
]
LEVEL = {
    "envs": 0,
    "policy": 1,
    "simulated_annotators": 2,
    "simulation": 2,
    "simulated_corrections": 2,
    "rl": 3,
    "finetune": 3,
    "evaluation": 4,
    "judges": 4,
    "loop": 5,
    "run_kinds": 6,
    "pipeline": 7,
}
TOP = {"web", "management", "urls", "apps", "admin", "migrations", "tasks"}
SHARED = {"training.models", "training.evaluation.metrics"}


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("training.")}


def _modules():
    for path in sorted((ROOT / "training").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        yield module, path


def test_no_stage_imports_a_stage_above_it():
    upward = []
    for module, path in _modules():
        stage = _stage(module)
        if stage in TOP or stage not in LEVEL and module not in SHARED:
            continue
        for target in _imports(path):
            if any(target == s or target.startswith(s + ".") for s in SHARED):
                continue
            if module in SHARED:
                upward.append(f"{module} (shared) imports {target}")
            elif _stage(target) in TOP:
                upward.append(f"{module} imports the web/command layer: {target}")
            elif LEVEL.get(_stage(target), -1) > LEVEL[stage]:
                upward.append(f"{module} ({stage}) imports {target} ({_stage(target)})")
    assert upward == []


def test_every_module_of_training_has_a_place_in_the_order():
    placed = set(LEVEL) | TOP | {s.split(".")[1] for s in SHARED} | {""}
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
