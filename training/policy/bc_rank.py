"""One rank of a data-parallel behaviour-cloning run: `python -m training.policy.bc_rank`, started
by core/parallel.py `launch` from `train_bc` with the initial model, the demonstrations and
the config in its work folder; rank 0 saves the trained weights there."""

from __future__ import annotations

import json
import pickle

import torch

from core import parallel

INITIAL, CONFIG, EXAMPLES, TRAINED = "initial", "config.pickle", "examples.json", "trained.pt"


def main() -> None:
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.policy.bc import train_bc

    work = parallel.rank_setup()
    spec = json.loads((work / parallel.SPEC).read_text())
    device = parallel.rank_init(spec["device"])
    try:
        model = AutoModelForCausalLM.from_pretrained(work / INITIAL).to(device)
        tokenizer = AutoTokenizer.from_pretrained(work / INITIAL)
        config = pickle.loads((work / CONFIG).read_bytes())  # written by this run's own parent
        examples = [tuple(example) for example in json.loads((work / EXAMPLES).read_text())]
        events = parallel.RankEvents(work)
        result = train_bc(
            model,
            tokenizer,
            examples,
            config,
            progress=lambda fraction: events.emit("progress", fraction),
            metrics=lambda step, values: events.emit("metrics", step, values),
            should_stop=lambda: (work / parallel.STOP).exists(),
        )
        if parallel.rank() == 0:
            torch.save(model.state_dict(), work / TRAINED)
        events.result(result)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
