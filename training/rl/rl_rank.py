"""Data-parallel RL: the worker's side that launches the processes, and one process's side.

`train_rl_in_processes` runs `train_rl` (training/rl/trainer.py) in `config.processes`
processes of core/parallel.py `launch`. What a process needs that cannot travel in a
file (the scorer, the environment's runners) it builds itself by calling `inputs`, a
"module:function" that takes `arguments` (JSON) and returns a dict with `scorer`,
`train_tasks`, `runner`, `dev_tasks` and `dev_runner` (`training.rl.app_inputs` for the app's
runs; `cli_inputs` in training/rl/trainer.py for the command line and the benchmarks). The
first process's events (metrics, log lines, checkpoints, the policies saved) reach the
caller's callbacks as they come.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict
from pathlib import Path

from core import parallel
from training.rl.config import RLConfig
from training.rl.trainer import RLCallbacks, RLResult, train_rl


def train_rl_in_processes(
    *,
    inputs: str,
    arguments: dict,
    policy_dir: str | Path,
    config: RLConfig,
    out_dir: str | Path,
    callbacks: RLCallbacks,
    reference_dir: str | Path | None = None,
    resume_from: str | Path | None = None,
    device: str = "cpu",
) -> RLResult:
    """`train_rl` in `config.processes` processes on this machine; returns the first one's result."""
    out = Path(out_dir)
    spec = {
        "inputs": inputs,
        "arguments": arguments,
        "policy_dir": str(policy_dir),
        "reference_dir": str(reference_dir) if reference_dir else None,
        "config": asdict(config),
        "out_dir": str(out),
        "resume_from": str(resume_from) if resume_from else None,
        "device": device,
    }
    callbacks.log(f"playing and training in {config.processes} data-parallel processes")
    result = parallel.launch(
        "training.rl.rl_rank",
        spec,
        out / "parallel",
        processes=config.processes,
        on_event=parallel.calling(callbacks),
        should_stop=callbacks.should_stop,
    )
    return RLResult(**result)


def build_inputs(inputs: str, arguments: dict) -> dict:
    """Call the "module:function" that builds a process's scorer, tasks and runners."""
    module, _, name = inputs.partition(":")
    return getattr(importlib.import_module(module), name)(**arguments)


def main() -> None:
    with parallel.rank_process() as (_work, spec, device, events):
        built = build_inputs(spec["inputs"], spec["arguments"])
        callbacks = RLCallbacks(
            **events.hooks(),
            policy_saved=lambda iteration, path, dev: events.emit("policy_saved", iteration, path, dev),
        )
        result = train_rl(
            policy_dir=spec["policy_dir"],
            reference_dir=spec["reference_dir"],
            scorer=built["scorer"],
            train_tasks=built["train_tasks"],
            runner=built["runner"],
            dev_tasks=built["dev_tasks"],
            dev_runner=built.get("dev_runner"),
            config=RLConfig(**spec["config"]),
            out_dir=spec["out_dir"],
            callbacks=callbacks,
            resume_from=spec["resume_from"],
            device=str(device),
        )
        events.result(asdict(result))


if __name__ == "__main__":
    main()
