"""An SFT or DPO run's training against plain TRL on the same tokens (plain Python, no Django).

    .venv/bin/python benchmarks/finetune_speed.py POLICY_DIR [--kind dpo|sft] [--rows 64] [--steps 24] \
        [--batch 8] [--repeats 3] [--threads 1] [--lora-rank 0]

The rows are the environment's scripted episodes as the `sft` and `dpo` exports write them
(for DPO, each against the same episode with a wrong answer). Two arms, each in a fresh
process, alternating `--repeats` times:

- arbiter: `training.finetune.train.finetune` as a run calls it: the rows rendered in the
  policy's format and tokenized with their masks, TRL's trainer with Arbiter's collator (DPO:
  each side's own mask) and the run's callbacks, the tuned model saved.
- floor: the same trainer class of TRL on the same token ids, given already tokenized, with
  TRL's own collator and no callbacks, nothing saved: what the training costs with nothing of
  Arbiter's around it.

With `--lora-rank` both arms train LoRA adapters of that rank (the run's `lora_rank`; the floor
gives TRL the same peft config). Prints, per arm, the median seconds of the whole call and per optimizer step, and the peak
resident memory of its process; then the ratio of the medians. Threads are set in each
process (`--threads`).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rows(kind: str, count: int) -> list[dict]:
    from annotate.chat_messages import prompt_messages, steps_to_messages
    from training.envs.base import EpisodeRunner
    from training.envs.encyclopedia.environment import EncyclopediaEnvironment
    from training.policy.episodes import play_scripted
    from training.policy.parsers import CompactParser

    env = EncyclopediaEnvironment()
    runner = EpisodeRunner(env)
    tools = list(runner.tools.values())
    tools_json = json.dumps([t.as_openai() for t in tools])
    out = []
    for task in env.tasks("train")[:count]:
        episode = play_scripted(runner, task, env.demonstrator(seed=0), CompactParser(tools))
        steps = steps_to_messages(episode.steps)
        prompt = prompt_messages(task.prompt, env.system_prompt)
        if kind == "sft":
            out.append({"messages": prompt + steps, "tools": tools_json})
        else:
            wrong = steps[:-1] + [{"role": "assistant", "content": "Nobody", "tool_calls": None}]
            out.append({"prompt": prompt, "chosen": steps, "rejected": wrong, "tools": tools_json})
    return out


def arm_arbiter(policy: str, kind: str, data: list[dict], steps: int, batch: int, lora_rank: int) -> dict:
    from training.finetune.config import FinetuneConfig
    from training.finetune.train import finetune

    config = FinetuneConfig(max_steps=steps, batch_size=batch, checkpoint_every=0, lora_rank=lora_rank)
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        result = finetune(kind, policy_dir=policy, train_rows=data, test_rows=[], config=config, out_dir=Path(out))
        seconds = time.perf_counter() - started
    assert result.steps == steps and not result.skipped
    return {"seconds": seconds}


def arm_floor(policy: str, kind: str, data: list[dict], steps: int, batch: int, lora_rank: int) -> dict:
    """TRL alone on the same token ids (tokenized here, before the clock starts)."""
    import transformers
    from datasets import Dataset

    from rewardmodel.train import no_progress_bars
    from training.finetune.config import FinetuneConfig
    from training.finetune.train import policy_context, prepare_dpo, prepare_sft, training_arguments
    from training.policy.chat import ChatFormat
    from training.policy.lora import lora_config
    from training.policy.model_io import load_policy

    peft_config = lora_config(lora_rank, FinetuneConfig().lora_alpha) if lora_rank else None
    transformers.set_seed(0)
    model, tokenizer = load_policy(policy)
    model.train()
    chat = ChatFormat.for_policy(tokenizer, policy)
    prepared = (prepare_sft if kind == "sft" else prepare_dpo)(data, chat, policy_context(model)).examples
    config = FinetuneConfig(max_steps=steps, batch_size=batch, checkpoint_every=0)
    with tempfile.TemporaryDirectory() as out, no_progress_bars():
        if kind == "sft":
            from trl import SFTConfig, SFTTrainer

            dataset = Dataset.from_list([{"input_ids": e["input_ids"]} for e in prepared])
            args = SFTConfig(**training_arguments(config, Path(out), steps, "cpu", {"packing": False}))
            trainer = SFTTrainer(
                model=model, args=args, train_dataset=dataset, processing_class=tokenizer, peft_config=peft_config
            )
        else:
            from trl import DPOConfig, DPOTrainer

            class PreTokenized(DPOTrainer):  # TRL's own collator; only its tokenizing is skipped
                def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
                    return dataset

            dataset = Dataset.from_list(
                [{k: e[k] for k in ("prompt_ids", "chosen_ids", "rejected_ids")} for e in prepared]
            )
            args = DPOConfig(**training_arguments(config, Path(out), steps, "cpu", {"beta": 0.1}))
            trainer = PreTokenized(
                model=model, args=args, train_dataset=dataset, processing_class=tokenizer, peft_config=peft_config
            )
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
    return {"seconds": seconds}


def child(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    data = rows(args.kind, args.rows)
    figures = (arm_arbiter if args.arm == "arbiter" else arm_floor)(
        args.policy, args.kind, data, args.steps, args.batch, args.lora_rank
    )
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policy", help="a policy directory (the default policy: var/policies/bc-default)")
    parser.add_argument("--kind", choices=["dpo", "sft"], default="dpo")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--lora-rank", type=int, default=0, help="LoRA adapters of this rank in both arms (0: all weights)"
    )
    parser.add_argument("--arm", choices=["arbiter", "floor"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        child(args)
        return
    results: dict[str, list[dict]] = {"floor": [], "arbiter": []}
    for _ in range(args.repeats):
        for arm in ("floor", "arbiter"):
            command = [sys.executable, __file__, args.policy, "--arm", arm, "--kind", args.kind]
            command += ["--rows", str(args.rows), "--steps", str(args.steps), "--batch", str(args.batch)]
            command += ["--threads", str(args.threads), "--lora-rank", str(args.lora_rank)]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode:
                raise SystemExit(f"{arm} failed:\n{done.stderr[-3000:]}")
            results[arm].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"| arm | {args.kind} seconds (median of {args.repeats}) | ms per step | peak RSS MB |\n|---|---|---|---|")
    summary = {}
    for arm, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        rss = max(r["peak_rss_mb"] for r in runs)
        summary[arm] = {"seconds": seconds, "ms_per_step": 1000 * seconds / args.steps, "peak_rss_mb": rss}
        print(f"| {arm} | {seconds:.2f} | {1000 * seconds / args.steps:.1f} | {rss:.0f} |")
    summary["ratio"] = summary["arbiter"]["seconds"] / summary["floor"]["seconds"]
    print(f"arbiter / floor: {summary['ratio']:.2f}x")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
