"""One rank of a data-parallel reward-model run: `python -m rewardmodel.train_rank`, started by
core/parallel.py `launch` (from rewardmodel/train.py) with the run's spec in its work folder."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from core import parallel
from core.callbacks import Callbacks
from rewardmodel.train import RewardModelConfig, train_reward_model


def main() -> None:
    with parallel.rank_process(init_group=False) as (_work, spec, device, events):
        result = train_reward_model(
            parallel.read_rows(Path(spec["rows"])),
            RewardModelConfig(**spec["config"]),
            Path(spec["out_dir"]),
            callbacks=Callbacks(**events.hooks()),
            resume_from=spec["resume_from"],
            device=device,
            bf16=spec["bf16"],
        )
        events.result(asdict(result))


if __name__ == "__main__":
    main()
