"""SFT and DPO of a policy with TRL's trainers, on rows tokenized in the policy's own format
(plain Python, transformers and TRL; no Django).

Rows come as the `sft` and `dpo` exports write them (OpenAI messages with tool calls, the
tools as JSON text). Each is rendered by the policy's chat template with its tool calls in
the policy's own syntax and tokenized as a rollout tokenizes an episode
(training/policy/conversations.py), with the mask of the tokens the policy wrote:

- SFT: `input_ids` and `assistant_masks`; SFTTrainer turns the mask into labels, so the loss
  is on the policy's turns, never on the task or the tool results.
- DPO: `prompt_ids` (the task and the steps both sides share), `chosen_ids` / `rejected_ids`
  and their masks. TRL 1.16's DPOTrainer tokenizes rows itself and counts every completion
  token in a side's log-probability, tool results included, which would make the environment's
  text "preferred"; `MaskedDPOTrainer` takes the tokenized rows as they are and its collator
  passes each side's own mask, as RL's action mask does.

A row that cannot be written in the policy's format, or is longer than its context, is left
out and counted with the reason (`Prepared.skipped`), never truncated in silence.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from core.callbacks import Callbacks
from rewardmodel.train import no_progress_bars, trainer_bridge
from training.finetune.config import DPOSettings, FinetuneConfig
from training.policy.chat import ChatFormat
from training.policy.checkpoints import carry_policy_file, write_checkpoint
from training.policy.conversations import ConversationError, PolicyConversations
from training.policy.lora import lora_config, merged
from training.policy.model_io import load_policy

MODEL_DIR = "model"


@dataclass
class Prepared:
    examples: list[dict]
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


@dataclass
class FinetuneResult:
    steps: int
    cancelled: bool
    seconds: float
    train_rows: int
    test_rows: int
    skipped: dict[str, int]
    model_dir: str | None
    evaluation: dict  # held-out figures of the trainer (eval_loss, DPO's reward accuracy, ...)


def policy_context(model) -> int:
    return int(getattr(model.config, "max_position_embeddings", 0) or 4096)


def prepare_sft(rows, chat, context: int) -> Prepared:
    conversations = PolicyConversations(chat)
    out = Prepared([])
    for row in rows:
        try:
            example = conversations.sft(row["messages"], row.get("tools"))
        except ConversationError as exc:
            out.skip(str(exc))
            continue
        if len(example["input_ids"]) > context:
            out.skip(f"longer than the policy's context of {context} tokens")
            continue
        out.examples.append(example)
    return out


def prepare_dpo(rows, chat, context: int) -> Prepared:
    conversations = PolicyConversations(chat)
    out = Prepared([])
    for row in rows:
        try:
            example = conversations.preference(row["prompt"], row["chosen"], row["rejected"], row.get("tools"))
        except ConversationError as exc:
            out.skip(str(exc))
            continue
        longest = len(example["prompt_ids"]) + max(len(example["chosen_ids"]), len(example["rejected_ids"]))
        if longest > context:
            out.skip(f"longer than the policy's context of {context} tokens")
            continue
        out.examples.append(example)
    return out


def _masked_dpo_classes():
    """The DPO trainer and collator that keep Arbiter's masks (built here: TRL loads lazily)."""
    import torch
    from trl import DPOTrainer
    from trl.trainer.dpo_trainer import DataCollatorForPreference
    from trl.trainer.utils import pad

    class MaskedPreferenceCollator(DataCollatorForPreference):
        """TRL's preference collator, with each side's completion mask taken from the row
        (`chosen_mask`, `rejected_mask`) instead of all ones."""

        def torch_call(self, examples):
            output = super().torch_call(examples)
            # The chosen sides of the batch first, then the rejected ones, as TRL orders input_ids.
            masks = [
                [0] * len(e["prompt_ids"]) + list(e[f"{side}_mask"])
                for side in ("chosen", "rejected")
                for e in examples
            ]
            if self.max_length is not None:
                cut = (
                    slice(None, self.max_length)
                    if self.truncation_mode == "keep_start"
                    else slice(-self.max_length, None)
                )
                masks = [m[cut] for m in masks]
            output["completion_mask"] = pad(
                [torch.tensor(m, dtype=torch.long) for m in masks],
                padding_value=0,
                padding_side="right",
                pad_to_multiple_of=self.pad_to_multiple_of,
            )
            return output

    class MaskedDPOTrainer(DPOTrainer):
        """DPOTrainer on rows Arbiter tokenized, with their masks."""

        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            return dataset

        def _set_signature_columns_if_needed(self):
            super()._set_signature_columns_if_needed()
            self._signature_columns = [*self._signature_columns, "chosen_mask", "rejected_mask"]

    return MaskedDPOTrainer, MaskedPreferenceCollator


def training_arguments(config: FinetuneConfig, out_dir: Path, steps: int, device: str, extra: dict):
    on_cpu = device == "cpu"
    return {
        "output_dir": str(out_dir),
        "max_steps": steps,
        "per_device_train_batch_size": config.batch_size,
        "per_device_eval_batch_size": config.batch_size,
        "learning_rate": config.learning_rate,
        "lr_scheduler_type": "constant",
        "weight_decay": config.weight_decay,
        "max_grad_norm": config.grad_clip or None,
        "seed": config.seed,
        "use_cpu": on_cpu,
        "bf16": not on_cpu,  # TRL's default is bf16, which on a CPU is many times slower than float32
        "activation_checkpointing": config.activation_checkpointing,  # TRL's default is on
        "dataloader_pin_memory": not on_cpu,
        "report_to": [],
        "disable_tqdm": True,
        "logging_steps": max(1, steps // 20),
        "save_strategy": "steps" if config.checkpoint_every else "no",
        "save_steps": config.checkpoint_every or 1,
        "save_total_limit": None,  # trainer_bridge removes the older ones once the new one is recorded
        "max_length": None,  # rows longer than the context were left out, never cut
        **extra,
    }


def finetune(
    kind: str,
    *,
    policy_dir: str | Path,
    train_rows,
    test_rows,
    config: FinetuneConfig,
    out_dir: str | Path,
    dpo: DPOSettings | None = None,
    callbacks: Callbacks | None = None,
    resume_from: str | None = None,
    device: str = "cpu",
) -> FinetuneResult:
    """SFT (`kind` "sft") or DPO ("dpo") of the policy in `policy_dir`; the tuned policy is saved
    under out_dir/model with its tokenizer and tool parser. `resume_from` is a checkpoint of a
    run with the same rows and settings."""
    import torch
    import transformers
    from datasets import Dataset
    from transformers import PrinterCallback

    callbacks = callbacks or Callbacks()
    if config.threads:
        torch.set_num_threads(config.threads)
    started = time.monotonic()
    out_dir = Path(out_dir)
    transformers.set_seed(config.seed)
    model, tokenizer = load_policy(policy_dir, device=device)
    model.train()
    chat = ChatFormat.for_policy(tokenizer, policy_dir)
    prepare = prepare_sft if kind == "sft" else prepare_dpo
    callbacks.progress(0.0, "tokenizing the rows in the policy's format")
    train, test = prepare(train_rows, chat, policy_context(model)), prepare(test_rows, chat, policy_context(model))
    for reason, count in train.skipped.items():
        callbacks.log(f"Left out {count} training row(s): {reason}")
    if not train.examples:
        raise ValueError(
            "No training row can be written in the policy's format"
            + (f" ({'; '.join(train.skipped)})" if train.skipped else " (the snapshot has none for this run)")
            + "."
        )
    steps = config.steps_for(len(train.examples))
    callbacks.log(
        f"{kind.upper()} on {len(train.examples)} rows ({len(test.examples)} held out), {steps} steps of "
        f"{config.batch_size}, learning rate {config.learning_rate:g}, on {device}."
    )
    peft_config = lora_config(config.lora_rank, config.lora_alpha, config.lora_dropout) if config.lora_rank else None
    if peft_config is not None:
        callbacks.log(f"LoRA of rank {config.lora_rank} on every linear layer; merged into the saved policy.")
    bridge = trainer_bridge(callbacks, lambda path: carry_policy_file(policy_dir, path))
    train_set = Dataset.from_list(train.examples)
    test_set = Dataset.from_list(test.examples) if test.examples else None
    with no_progress_bars():
        trainer = _trainer(kind, model, tokenizer, train_set, config, out_dir, steps, device, dpo, peft_config, bridge)
        trainer.remove_callback(PrinterCallback)
        trainer.train(resume_from_checkpoint=resume_from)
        evaluation = {}
        model_dir = None
        if not bridge.cancelled:
            if test_set is not None:
                callbacks.progress(0.99, "held-out rows")
                evaluation = {k: float(v) for k, v in trainer.evaluate(test_set).items() if isinstance(v, int | float)}
            model_dir = out_dir / MODEL_DIR
            write_checkpoint(model_dir, merged(trainer.model), tokenizer, policy_dir=policy_dir)
    return FinetuneResult(
        steps=trainer.state.global_step,
        cancelled=bridge.cancelled,
        seconds=round(time.monotonic() - started, 1),
        train_rows=len(train.examples),
        test_rows=len(test.examples),
        skipped=_merged(train.skipped, test.skipped),
        model_dir=str(model_dir) if model_dir else None,
        evaluation=evaluation,
    )


def _trainer(kind, model, tokenizer, train_set, config, out_dir, steps, device, dpo, peft_config, bridge):
    """TRL's SFTTrainer, or the DPO trainer and collator that keep Arbiter's masks, for the rows."""
    if kind == "sft":
        from trl import SFTConfig, SFTTrainer

        args = SFTConfig(**training_arguments(config, out_dir, steps, device, {"packing": False}))
        return SFTTrainer(
            model=model,
            args=args,
            train_dataset=train_set,
            processing_class=tokenizer,
            callbacks=[bridge],
            peft_config=peft_config,
        )
    from trl import DPOConfig

    trainer_class, collator_class = _masked_dpo_classes()
    dpo = dpo or DPOSettings()
    args = DPOConfig(
        **training_arguments(config, out_dir, steps, device, {"beta": dpo.beta, "loss_type": [dpo.loss_type]})
    )
    collator = collator_class(pad_token_id=tokenizer.pad_token_id, max_length=None)
    return trainer_class(
        model=model,
        args=args,
        train_dataset=train_set,
        processing_class=tokenizer,
        data_collator=collator,
        callbacks=[bridge],
        peft_config=peft_config,  # the reference is the model with its adapters off
    )


def _merged(*counts: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in counts:
        for reason, n in part.items():
            out[reason] = out.get(reason, 0) + n
    return out
