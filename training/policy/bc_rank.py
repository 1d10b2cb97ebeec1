"""One rank of a data-parallel behaviour-cloning run: `python -m training.policy.bc_rank`, started
by core/parallel.py `launch` from `train_bc` with the initial model, the demonstrations and
the config in its work folder; rank 0 saves the trained weights there."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from core import parallel
from training.policy.bc import INITIAL, TRAINED, train_bc
from training.policy.bc_config import BCConfig


def main() -> None:
    with parallel.rank_process() as (work, spec, device, events):
        model = AutoModelForCausalLM.from_pretrained(work / INITIAL).to(device)
        tokenizer = AutoTokenizer.from_pretrained(work / INITIAL)
        examples = [tuple(example) for example in parallel.read_rows(Path(spec["examples"]))]
        result = train_bc(
            model,
            tokenizer,
            examples,
            BCConfig(**spec["config"]),
            progress=lambda fraction: events.emit("progress", fraction),
            metrics=lambda step, values: events.emit("metrics", step, values),
            should_stop=lambda: (work / parallel.STOP).exists(),  # agreed by train_bc's Ranks.any
        )
        if parallel.rank() == 0:
            torch.save(model.state_dict(), work / TRAINED)
        events.result(result)


if __name__ == "__main__":
    main()
