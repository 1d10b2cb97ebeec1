"""One rank of a data-parallel reward-model run: `python -m rewardmodel.train_rank`, started by
core/parallel.py `launch` (from rewardmodel/train.py) with the run's spec in its work folder."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from core import parallel
from core.callbacks import Callbacks
from rewardmodel.train import RewardModelConfig, train_reward_model


def main() -> None:
    work = parallel.rank_setup()
    spec = json.loads((work / parallel.SPEC).read_text())
    with open(spec["rows"]) as source:
        rows = [json.loads(line) for line in source]
    events = parallel.RankEvents(work)
    callbacks = Callbacks(**events.hooks())
    result = train_reward_model(
        rows,
        RewardModelConfig(**spec["config"]),
        Path(spec["out_dir"]),
        callbacks=callbacks,
        resume_from=spec["resume_from"],
        device=spec["device"],
        bf16=spec["bf16"],
    )
    events.result(asdict(result))


if __name__ == "__main__":
    main()
