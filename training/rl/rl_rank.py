"""Data-parallel RL: one process's side, `python -m training.rl.rl_rank`.

`train_rl_in_processes` (training/rl/trainer.py) runs `train_rl` in `config.processes`
processes of core/parallel.py `launch`, each this module's `main`. What a process needs that cannot travel in a
file (the scorer, the environment's runners) it builds itself by calling `inputs`, a
"module:function" that takes `arguments` (JSON) and returns a dict with `scorer`,
`train_tasks`, `runner`, `dev_tasks` and `dev_runner` (`training.rl.app_inputs` for the app's
runs; `cli_inputs` in training/rl/trainer.py for the command line and the benchmarks). The
first process's events (metrics, log lines, checkpoints, the policies saved) reach the
caller's callbacks as they come.
"""

from __future__ import annotations

from dataclasses import asdict

from core import parallel
from core.callbacks import RLCallbacks
from training.rl.config import RLConfig
from training.rl.trainer import build_inputs, train_rl


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
