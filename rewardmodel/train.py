"""Reward-model training: TRL's RewardTrainer on preference pairs in the `trl` export form.

    from rewardmodel.train import RewardModelConfig, train_reward_model
    rows = [json.loads(line) for line in open("train.jsonl")]  # prompt, chosen, rejected, margin
    config = RewardModelConfig(tokenizer_dir="var/policies/default")
    result = train_reward_model(rows, config, Path("var/reward-models/1"))

Each side of a pair becomes one plain-text transcript with its question (serialize.py),
shortened to fit `max_length` tokens, so TRL drops no pair for length. Ties (margin 0 or
`preferred` "tie") are left out: they name no better side. The loss is TRL's
-log sigmoid(r_chosen - r_rejected - margin), with the vote margin when `use_margin`.

The output folder:
    out_dir/checkpoints/checkpoint-N/   the latest checkpoint (Trainer format), to resume from
    out_dir/model/                      the final model and tokenizer (save_pretrained) and
                                        arbiter_reward_model.json (config, backbone, tokens per side,
                                        serialization version), which scoring.py reads
    out_dir/model/members/N/            with `ensemble` N > 1: the other members, each a model
                                        directory of its own (trained under out_dir/member-N/)

Plain Python, no Django: torch, transformers, datasets and TRL are imported inside the
functions, so the web process can import RewardModelConfig to validate a launch.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from core import parallel
from core.callbacks import Callbacks, nothing
from core.config_ranges import out_of_range
from rewardmodel.answer_pairs import derived_answer_pairs, is_answer_pair
from rewardmodel.backbones import (
    MINILM,
    POLICY_LLAMA,
    BackboneError,
    backbone_check,
    build_backbone,
    max_context,
)
from rewardmodel.serialize import SERIALIZATION_VERSION, VIEWS, pair_text

META_FILE = "arbiter_reward_model.json"
META_FORMAT = "arbiter.reward_model/v1"
# Peak learning rates when the config leaves it empty: a model trained from scratch takes
# larger steps than a pretrained one being fine-tuned.
DEFAULT_LEARNING_RATES = {POLICY_LLAMA: 3e-4, MINILM: 5e-5}
PRETRAINED_LEARNING_RATE = 2e-5
LOG_POINTS = 100  # about this many metric points per run, whatever its length


def _help(text: str) -> dict:
    return {"help": text}


# What a reward-model run can sensibly be given (policy-llama sizes, a context a GPU can hold).
RANGES = {
    "hidden": (8, 4096),
    "layers": (1, 48),
    "heads": (1, 64),
    "max_length": (16, 32768),
    "learning_rate": (0, 1),
    "epochs": (0, 1000),
    "batch_size": (1, 4096),
    "weight_decay": (0, 10),
    "checkpoint_every": (0, 1_000_000),
    "ensemble": (1, 8),
    "answer_pair_weight": (0, 100),
    "processes": (1, 64),
}


@dataclass
class RewardModelConfig:
    backbone: str = field(
        default=POLICY_LLAMA,
        metadata=_help(
            "'policy-llama' (a small Llama-style model trained from scratch, sharing the policy's tokenizer), "
            "'minilm' (the pretrained MiniLM-L6 encoder, 512 tokens at most) or the path of a local Hugging Face "
            "model directory."
        ),
    )
    tokenizer_dir: str = field(
        default="", metadata=_help("policy-llama only: the policy directory whose tokenizer the reward model shares.")
    )
    hidden: int = field(default=128, metadata=_help("policy-llama only: hidden size (a multiple of heads)."))
    layers: int = field(default=2, metadata=_help("policy-llama only: number of transformer layers."))
    heads: int = field(default=4, metadata=_help("policy-llama only: attention heads per layer."))
    max_length: int = field(
        default=512,
        metadata=_help(
            "Tokens per side, question included; longer trajectories are shortened to fit (observations cut, "
            "then middle steps dropped). The backbone's own limit caps it (512 for minilm)."
        ),
    )
    learning_rate: float | None = field(
        default=None,
        metadata=_help(
            "Peak learning rate; empty for the backbone's default: 3e-4 for policy-llama (from scratch), 5e-5 for "
            "minilm, 2e-5 for another pretrained directory."
        ),
    )
    epochs: float = field(default=3.0, metadata=_help("Passes over the training pairs (fractions allowed)."))
    batch_size: int = field(default=16, metadata=_help("Pairs per optimizer step."))
    weight_decay: float = field(default=0.0, metadata=_help("AdamW weight decay."))
    warmup_ratio: float = field(
        default=0.05,
        metadata=_help(
            "Share of the steps over which the learning rate rises from 0 to its peak; it then falls linearly to 0."
        ),
    )
    seed: int = field(default=0, metadata=_help("Seed of the initial weights and of the order of the pairs."))
    use_margin: bool = field(
        default=True,
        metadata=_help(
            "Use each pair's vote margin in the loss, so pairs with stronger agreement must be separated by more."
        ),
    )
    checkpoint_every: int = field(
        default=50, metadata=_help("Optimizer steps between checkpoints, from which a stopped run resumes; 0 for none.")
    )
    view: str = field(
        default="path",
        metadata=_help(
            "What the model reads of each episode (rewardmodel/serialize.py): 'path', the whole episode; 'evidence', "
            "the question, the quotes and tool results the agent read and its answer, as WebGPT's reward model "
            "read them, so it can only check the answer against the evidence."
        ),
    )
    answer_pair_weight: float = field(
        default=1.0,
        metadata=_help(
            "Loss weight of an answer pair (the same tool calls on both sides, different answers: the loop's answer "
            "branches) against 1 for any other pair; the loss is the weighted mean over each batch, so the steps stay "
            "the same (rewardmodel/answer_pairs.py)."
        ),
    )
    derived_answer_pairs: bool = field(
        default=False,
        metadata=_help(
            "Also train on two derived pairs for each decisive pair whose sides answered differently: the winner's "
            "episode over the same episode with the loser's answer, and the loser's with the winner's answer over "
            "the loser's own. It assumes the preference was about the answer, as annotators who check answers first "
            "judge (rewardmodel/answer_pairs.py). Off: on unseen worlds it taught names, not checking "
            "(benchmarks/RESULTS.md, issue 54)."
        ),
    )
    ensemble: int = field(
        default=1,
        metadata=_help(
            "Members trained on the same pairs from seeds seed, seed + 1, ...; the model scores with their mean, and "
            "RL can optimise the mean minus a multiple of their spread (Coste et al. 2024). Each member costs a "
            "training run."
        ),
    )

    processes: int = field(
        default=1,
        metadata=_help(
            "Data-parallel training processes on the worker (torch.distributed under accelerate): one per GPU on a "
            "GPU worker (NCCL), CPU processes over gloo otherwise. Each trains on its share of every batch and the "
            "gradients are averaged, so the loss curve is the one process's at the same batch size; batch size must "
            "be a multiple of it."
        ),
    )

    def resolved_learning_rate(self) -> float:
        """The learning rate that training uses: the field, or the backbone's default when it is empty."""
        if self.learning_rate is not None:
            return self.learning_rate
        return DEFAULT_LEARNING_RATES.get(self.backbone, PRETRAINED_LEARNING_RATE)

    def validate(self) -> list[str]:
        """Problems with this config, each starting with its field ("epochs: ..."); empty when it is fine.

        Reads files to check the backbone but loads no model and imports neither torch nor transformers.
        """
        problems = out_of_range(self, RANGES)
        if self.learning_rate is not None and not self.learning_rate > 0:
            problems.append("learning_rate: must be positive (or empty for the backbone's default).")
        if self.epochs == 0:
            problems.append("epochs: must be positive.")
        if self.answer_pair_weight == 0:
            problems.append("answer_pair_weight: must be positive.")
        if self.view not in VIEWS:
            problems.append(f"view: one of {', '.join(VIEWS)}.")
        if not 0 <= self.warmup_ratio < 1:
            problems.append("warmup_ratio: must be at least 0 and below 1.")
        if self.processes > 1 and self.batch_size % self.processes:
            problems.append(
                f"batch_size: {self.batch_size} pairs cannot be shared evenly by {self.processes} processes; "
                "make it a multiple of processes."
            )
        try:
            backbone_check(self)
        except BackboneError as exc:
            problems.append(str(exc))
        return problems


@dataclass
class TrainResult:
    steps: int  # optimizer steps done, counting those before a resume
    cancelled: bool
    seconds: float
    train_pairs: int  # pairs trained on (ties left out, derived answer pairs counted)
    model_dir: str | None  # out_dir/model, or None when cancelled


def is_tie(row: dict) -> bool:
    """A kept tie of the export: no side is better, so it teaches no direction."""
    return row.get("preferred") == "tie" or row.get("margin") == 0


def training_pairs(rows: list[dict], derived: bool = False) -> list[dict]:
    """The pairs a model trains on: the rows that are not ties, then (with `derived`) the derived
    answer pairs of those (rewardmodel/answer_pairs.py)."""
    pairs = [row for row in rows if not is_tie(row)]
    return pairs + derived_answer_pairs(pairs) if derived else pairs


def pair_dataset(
    rows: list[dict],
    tokenizer,
    max_tokens: int,
    use_margin: bool,
    view: str = "path",
    *,
    answer_pair_weight: float = 1.0,
    derived: bool = False,
):
    """The `datasets.Dataset` training uses: `chosen` and `rejected` transcripts (+ `margin`, `weight`).

    Each text is serialized so that TRL's tokenization of it with the end token it appends
    has at most `max_tokens` ids; train a RewardTrainer with `RewardConfig(max_length=max_tokens,
    eos_token=tokenizer.eos_token)` on it and no pair is dropped. Ties are left out and, with
    `derived`, derived answer pairs added; the margin column is there only with `use_margin` and
    some margin that is not zero, the weight column (`answer_pair_weight` for an answer pair, 1
    for any other) only when the weight is not 1.
    """
    from datasets import Dataset

    budget = max_tokens - len(tokenizer(tokenizer.eos_token, add_special_tokens=False)["input_ids"])
    pairs = training_pairs(rows, derived)
    columns = {
        "chosen": [pair_text(row["prompt"], row["chosen"], tokenizer, budget, view) for row in pairs],
        "rejected": [pair_text(row["prompt"], row["rejected"], tokenizer, budget, view) for row in pairs],
    }
    margins = [float(row.get("margin") or 0.0) for row in pairs]
    if use_margin and any(margins):
        columns["margin"] = margins
    if answer_pair_weight != 1.0:
        columns["weight"] = [answer_pair_weight if is_answer_pair(row) else 1.0 for row in pairs]
    return Dataset.from_dict(columns)


def weighted_pair_loss(chosen, rejected, margin, weight):
    """TRL's pair loss -log sigmoid(r_chosen - r_rejected - margin), as a weighted mean over the pairs (tensors)."""
    import torch

    losses = -torch.nn.functional.logsigmoid(chosen - rejected - margin)
    return (weight * losses).sum() / weight.sum()


def weighted_reward_trainer():
    """TRL's RewardTrainer with a loss weight per pair (the dataset's `weight` column): the loss is
    the weighted mean of TRL's -log sigmoid(r_chosen - r_rejected - margin) over the batch, so
    weighing some pairs up changes neither the steps nor the learning rate's schedule. Built
    here because TRL loads lazily."""
    import torch
    from trl import RewardTrainer

    class WeightedRewardTrainer(RewardTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            collate = self.data_collator

            def with_weights(examples: list[dict]) -> dict:
                batch = collate(examples)
                batch["weight"] = torch.tensor([example["weight"] for example in examples], dtype=torch.float)
                return batch

            self.data_collator = with_weights

        def _set_signature_columns_if_needed(self):
            super()._set_signature_columns_if_needed()
            if "weight" not in self._signature_columns:  # else the trainer drops the column as unused
                self._signature_columns = [*self._signature_columns, "weight"]

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            weight = inputs.pop("weight")
            # TRL's own loss keeps its metrics (accuracy, margin); only the loss is weighed here.
            _, outputs = super().compute_loss(model, inputs, return_outputs=True)
            chosen, rejected = torch.chunk(outputs.logits.squeeze(-1), chunks=2)
            loss = weighted_pair_loss(chosen, rejected, inputs.get("margin", 0.0), weight)
            if self.args.center_rewards_coefficient is not None:
                loss = loss + self.args.center_rewards_coefficient * torch.mean((chosen + rejected) ** 2)
            return (loss, outputs) if return_outputs else loss

    return WeightedRewardTrainer


def latest_checkpoint(out_dir: str | Path) -> str | None:
    """The newest complete checkpoint under out_dir/checkpoints, or None."""
    found = []
    for path in (Path(out_dir) / "checkpoints").glob("checkpoint-*"):
        match = re.fullmatch(r"checkpoint-(\d+)", path.name)
        if match and (path / "trainer_state.json").exists():
            found.append((int(match.group(1)), path))
    return str(max(found)[1]) if found else None


def _meta(config: RewardModelConfig, tokenizer, max_tokens: int) -> dict:
    return {
        "format": META_FORMAT,
        "backbone": config.backbone,
        "max_tokens": max_tokens,
        "eos_token": tokenizer.eos_token,
        "serialization_version": SERIALIZATION_VERSION,
        "view": config.view,
        "config": asdict(config),
    }


def _write_meta(directory: str | Path, meta: dict) -> None:
    (Path(directory) / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


# A step's figures written in the run's log (all go to its metrics): the reward model's, DPO's, SFT's.
SHOWN_LOGS = ("loss", "accuracy", "margin", "rewards/accuracies", "rewards/margins", "mean_token_accuracy")


def trainer_bridge(callbacks: Callbacks, stamp: Callable[[Path], None] = nothing):
    """A transformers TrainerCallback that reports to `callbacks` (built here: transformers loads
    lazily): metrics and a log line at each logging step, progress and the cancel check after
    every step, and each checkpoint, `stamp(path)`-ed first (the files a resume needs beside
    the trainer's), recorded before the older ones are removed."""
    from transformers import TrainerCallback

    class Bridge(TrainerCallback):
        cancelled = False

        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = logs or {}
            if "train_runtime" in logs:  # the run's summary, not a step's metrics
                return
            values = {
                f"train/{key}": float(value)
                for key, value in logs.items()
                if isinstance(value, int | float) and not isinstance(value, bool)
            }
            callbacks.metrics(state.global_step, values)
            shown = ", ".join(f"{key} {logs[key]:.4g}" for key in SHOWN_LOGS if key in logs)
            callbacks.log(f"step {state.global_step}/{state.max_steps}: {shown}")

        def on_step_end(self, args, state, control, **kwargs):
            callbacks.progress(state.global_step / state.max_steps, f"step {state.global_step} of {state.max_steps}")
            if callbacks.should_stop():
                self.cancelled = True
                control.should_training_stop = True
                # Keep the work done so far: a cancelled run can be resumed from this checkpoint.
                control.should_save = args.save_strategy != "no"

        def on_save(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            stamp(path)
            callbacks.checkpoint(state.global_step, str(path))
            # The older checkpoints go only now that the new one is recorded: with the trainer's
            # own rotation (save_total_limit) a worker killed between its rotation and this call
            # left the run pointing at a deleted checkpoint, and the resume began again at step 0.
            for old in Path(args.output_dir).glob("checkpoint-*"):
                if old != path and old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)

    return Bridge()


@contextmanager
def no_progress_bars():
    """Silence the progress bars of datasets and transformers (they would fill the job's log), then restore them."""
    import datasets
    from transformers.utils import logging as hf_logging

    shown = datasets.is_progress_bar_enabled(), hf_logging.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown[0]:
            datasets.enable_progress_bars()
        if shown[1]:
            hf_logging.enable_progress_bar()


def _trl_args(
    config: RewardModelConfig, out_dir: Path, tokenizer, max_tokens: int, n_pairs: int, device: str, bf16: bool
):
    from trl import RewardConfig

    steps = math.ceil(math.ceil(n_pairs / config.batch_size) * config.epochs)
    on_cpu = device == "cpu"
    return RewardConfig(
        output_dir=str(out_dir / "checkpoints"),
        learning_rate=config.resolved_learning_rate(),
        num_train_epochs=config.epochs,
        per_device_train_batch_size=config.batch_size // parallel.world_size(),  # the same global batch
        weight_decay=config.weight_decay,
        warmup_steps=config.warmup_ratio,  # transformers 5: a value below 1 is a share of the steps
        lr_scheduler_type="linear",
        seed=config.seed,
        data_seed=config.seed,
        max_length=max_tokens,
        eos_token=tokenizer.eos_token,
        bf16=bf16 and not on_cpu,  # TRL's default is bf16=True
        activation_checkpointing=False,  # TRL's gradient_checkpointing defaults to True (a deprecated alias)
        use_cpu=on_cpu,
        ddp_find_unused_parameters=False,  # every parameter is used: no extra graph traversal per step
        dataloader_pin_memory=not on_cpu,
        report_to=[],
        disable_tqdm=True,
        logging_steps=max(1, steps // LOG_POINTS),
        save_strategy="steps" if config.checkpoint_every else "no",
        save_steps=config.checkpoint_every or 1,  # (unused when saving is off, but must be positive)
        save_total_limit=None,  # the older checkpoints are removed by trainer_bridge's on_save, once the new one is recorded
    )


def train_reward_model(
    train_rows: list[dict],
    config: RewardModelConfig,
    out_dir: Path,
    *,
    callbacks: Callbacks | None = None,
    resume_from: str | None = None,
    device: str = "cpu",
    bf16: bool = False,
) -> TrainResult:
    """Train a reward model on `trl`-form rows and save it under out_dir/model (see the module docstring).

    Raises BackboneError for a backbone that cannot be built and ValueError when no pair has a
    preferred side. `resume_from` is a checkpoint directory (see `latest_checkpoint`) of a run
    with the same rows and config.
    """
    callbacks = callbacks or Callbacks()
    if config.processes > 1 and not parallel.in_rank():
        return _train_in_processes(train_rows, config, out_dir, callbacks, resume_from, device, bf16)
    import transformers
    from transformers import PrinterCallback
    from trl import RewardTrainer

    started = time.monotonic()
    out_dir = Path(out_dir)
    transformers.set_seed(config.seed)  # before the model: its initial weights come from this seed
    model, tokenizer = build_backbone(config)
    max_tokens = max_context(model, tokenizer, config.max_length)
    callbacks.progress(0.0, "serializing pairs")
    dataset = pair_dataset(
        train_rows,
        tokenizer,
        max_tokens,
        config.use_margin,
        config.view,
        answer_pair_weight=config.answer_pair_weight,
        derived=config.derived_answer_pairs,
    )
    if len(dataset) == 0:
        raise ValueError("No pair with a preferred side to train on (ties are left out).")
    n_params = sum(p.numel() for p in model.parameters())
    ties = sum(map(is_tie, train_rows))  # ties among the rows given (the caller may have left them out before)
    derived = len(dataset) - (len(train_rows) - ties)
    callbacks.log(
        f"{config.backbone}: {n_params / 1e6:.2f}M parameters, {len(dataset)} pairs"
        + (f" ({ties} ties among them left out)" if ties else "")
        + (f" ({derived} of them derived answer pairs)" if derived else "")
        + f", {max_tokens} tokens per side"
    )
    meta = _meta(config, tokenizer, max_tokens)
    bridge = trainer_bridge(callbacks, lambda path: _write_meta(path, meta))
    args = _trl_args(config, out_dir, tokenizer, max_tokens, len(dataset), device, bf16)
    model_dir = None
    with no_progress_bars():
        trainer_class = weighted_reward_trainer() if "weight" in dataset.column_names else RewardTrainer
        trainer = trainer_class(
            model=model, args=args, train_dataset=dataset, processing_class=tokenizer, callbacks=[bridge]
        )
        trainer.remove_callback(PrinterCallback)  # the bridge reports; no dicts printed to stdout
        if len(trainer.train_dataset) != len(dataset):
            raise RuntimeError(
                f"TRL dropped {len(dataset) - len(trainer.train_dataset)} pairs longer than "
                f"{max_tokens} tokens: serialization should have made them fit."
            )
        trainer.train(resume_from_checkpoint=resume_from)
        if not bridge.cancelled:
            model_dir = out_dir / "model"
            if trainer.is_world_process_zero():  # one writer when the run has several processes
                trainer.model.save_pretrained(model_dir)
                tokenizer.save_pretrained(model_dir)
                _write_meta(model_dir, meta)
    if model_dir:
        callbacks.log(f"saved the reward model to {model_dir}")
        callbacks.progress(1.0, "done")
    return TrainResult(
        steps=trainer.state.global_step,
        cancelled=bridge.cancelled,
        seconds=time.monotonic() - started,
        train_pairs=len(dataset),
        model_dir=str(model_dir) if model_dir else None,
    )


def _train_in_processes(train_rows, config, out_dir, callbacks, resume_from, device, bf16) -> TrainResult:
    """`train_reward_model` in `config.processes` ranks (core/parallel.py, rank code in
    rewardmodel/train_rank.py), rank 0's events passed on to `callbacks` as they come."""
    out_dir = Path(out_dir)
    work = out_dir / "parallel"
    work.mkdir(parents=True, exist_ok=True)
    spec = {
        "rows": str(parallel.write_rows(work / "rows.jsonl", train_rows)),
        "config": asdict(config),
        "out_dir": str(out_dir),
        "resume_from": resume_from,
        "device": device,
        "bf16": bf16,
    }
    callbacks.log(f"training in {config.processes} data-parallel processes")
    result = parallel.launch(
        "rewardmodel.train_rank",
        spec,
        work,
        processes=config.processes,
        on_event=parallel.calling(callbacks),
        should_stop=callbacks.should_stop,
    )
    return TrainResult(**result)


MEMBERS_DIR = "members"


def train_reward_ensemble(
    train_rows: list[dict],
    config: RewardModelConfig,
    out_dir: Path,
    *,
    callbacks: Callbacks | None = None,
    resume_from: str | None = None,
    device: str = "cpu",
    bf16: bool = False,
) -> TrainResult:
    """`config.ensemble` reward models on the same rows, from seeds seed, seed + 1, ...: the
    first in out_dir/model as `train_reward_model` makes it, the others in
    out_dir/model/members/N, listed in the first one's metadata. A member already trained is
    not trained again, so a stopped run resumes with the member it was training (from
    `resume_from` when that checkpoint is the member's)."""
    callbacks = callbacks or Callbacks()
    out_dir = Path(out_dir)
    count, started, steps = config.ensemble, time.monotonic(), 0

    def member_callbacks(index: int) -> Callbacks:
        def progress(fraction: float, message: str = "") -> None:
            callbacks.progress((index + fraction) / count, f"member {index + 1} of {count}: {message}")

        return Callbacks(
            progress=progress,
            metrics=callbacks.metrics if index == 0 else nothing,
            log=callbacks.log,
            should_stop=callbacks.should_stop,
            checkpoint=callbacks.checkpoint,
        )

    def resume_of(directory: Path) -> str | None:
        return resume_from if resume_from and Path(resume_from).is_relative_to(directory) else None

    first = out_dir / "model"
    if not (first / META_FILE).exists() or count == 1:
        result = train_reward_model(
            train_rows,
            config,
            out_dir,
            callbacks=member_callbacks(0),
            resume_from=resume_of(out_dir / "checkpoints") if count > 1 else resume_from,
            device=device,
            bf16=bf16,
        )
        if result.cancelled or count == 1:
            return result
        steps, pairs = result.steps, result.train_pairs
    else:
        pairs = len(training_pairs(train_rows, config.derived_answer_pairs))
    members = []
    for index in range(1, count):
        target = first / MEMBERS_DIR / str(index)
        members.append(f"{MEMBERS_DIR}/{index}")
        if (target / META_FILE).exists():
            continue
        work = out_dir / f"member-{index}"
        callbacks.log(f"ensemble member {index + 1} of {count} (seed {config.seed + index})")
        result = train_reward_model(
            train_rows,
            replace(config, seed=config.seed + index, ensemble=1),
            work,
            callbacks=member_callbacks(index),
            resume_from=resume_of(work),
            device=device,
            bf16=bf16,
        )
        if result.cancelled:
            return TrainResult(
                steps=steps + result.steps,
                cancelled=True,
                seconds=time.monotonic() - started,
                train_pairs=pairs,
                model_dir=None,
            )
        steps += result.steps
        if target.exists():  # what a stopped run left half moved
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        Path(result.model_dir).rename(target)
    meta = json.loads((first / META_FILE).read_text())
    _write_meta(first, {**meta, "members": members})
    callbacks.progress(1.0, "done")
    return TrainResult(
        steps=steps, cancelled=False, seconds=time.monotonic() - started, train_pairs=pairs, model_dir=str(first)
    )
