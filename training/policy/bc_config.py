"""Behaviour-cloning settings, apart from the training code so the web process can read them
(to validate a launch) without importing torch."""

from __future__ import annotations

from dataclasses import dataclass, field

from training.envs.base import FRESH_WORLD_SEED
from training.envs.mistakes import DEMONSTRATORS, SLIPS, Mistakes
from training.policy.lora import lora_settings_problems


@dataclass
class BCConfig:
    """Behaviour cloning settings; every field is saved beside the model."""

    demos_per_task: int = field(default=1, metadata={"help": "scripted episodes per training task of the main world"})
    extra_worlds: int = field(
        default=20,
        metadata={
            "help": "also one episode on every task of this many other generated worlds (seeds 1-20): more names than it can memorise, so it learns to read (benchmarks/RESULTS.md, issue 16)"
        },
    )
    mistakes: Mistakes = field(
        default_factory=lambda: SLIPS, metadata={"help": "the demonstrator's random slips, each at its rate"}
    )
    demonstrator: str = field(
        default="habits",
        metadata={
            "help": "habits: the slips and the habits (each the same wrong move in one kind of situation: docs/agent.md); random: the slips only (the default before 2026-12-02); clean: neither"
        },
    )
    demonstrations: str = field(
        default="all",
        metadata={
            "help": "all: every demonstration; successful: only those the rubric marks correct (filtered behaviour cloning, a baseline)"
        },
    )
    vocab_size: int = field(
        default=1024,
        metadata={"help": "BPE vocabulary (at 2,048 held-out names become single tokens never seen in training)"},
    )
    hidden: int = field(
        default=128,
        metadata={
            "help": "model width (0.9M parameters with 4 layers: about 3x the steps of hidden 192 x 6 in the budget)"
        },
    )
    layers: int = field(default=4, metadata={"help": "transformer blocks"})
    heads: int = field(default=4, metadata={"help": "attention heads"})
    learning_rate: float = field(
        default=3e-3,
        metadata={
            "help": "AdamW peak learning rate (3e-3 with 100 warm-up steps: the policy learns to read on every seed tried; 2e-3 with 30 on 2 of 3, benchmarks/RESULTS.md)"
        },
    )
    warmup_steps: int = field(default=100, metadata={"help": "linear warm-up, then cosine decay"})
    batch_size: int = field(default=16, metadata={"help": "episodes per optimizer step"})
    max_steps: int = field(
        default=1500,
        metadata={
            "help": "optimizer steps: training is bounded by steps, so a busy machine trains as fully as a fast one"
        },
    )
    max_epochs: float = field(
        default=40.0,
        metadata={
            "help": "at most this many passes over the demonstrations, steps with warm-up and extension scaled down to it: 18 demonstrations get about 45 steps, not 1,500 (the default's 2,000+ take 12-20 passes, under it)"
        },
    )
    max_seconds: float = field(
        default=0.0,
        metadata={
            "help": "an optional wall-time cut (0: none, the default); the learning rate anneals to whichever limit comes first"
        },
    )
    budget_seconds: float = field(
        default=600.0,
        metadata={"help": "training longer than this is reported loudly (the policy is still complete); 0: never"},
    )
    observation_loss_weight: float = field(
        default=0.5, metadata={"help": "weight of the language-model loss on environment tokens"}
    )
    first_action_weight: float = field(
        default=2.0, metadata={"help": "loss weight of the first action's tokens (the search that copies the question)"}
    )
    grad_clip: float = field(default=1.0, metadata={"help": "gradient norm clip"})
    dev_every: int = field(
        default=250,
        metadata={
            "help": "every this many steps (and at the end) the checkpoint is judged by greedy success on dev tasks of a world no stage trains on, and the best is kept (0: keep the last; one process only)"
        },
    )
    dev_tasks: int = field(default=64, metadata={"help": "dev tasks each checkpoint is judged on"})
    extend_steps: int = field(
        default=1000,
        metadata={
            "help": "while the checkpoint judged at the end beats every earlier one, train on at the final learning rate, dev_every steps at a time, up to this many steps more (0: stop at max_steps)"
        },
    )
    extend_patience: int = field(
        default=2,
        metadata={
            "help": "the extension goes on while one of the last this many judged checkpoints is the best so far (1: only the last; on 64 dev tasks one judgement's noise stopped a filtered behaviour cloning at 9% right after 14%, just as it began to read: benchmarks/RESULTS.md, issue 54)"
        },
    )
    threads: int = field(
        default=1,
        metadata={
            "help": "torch threads while training, fixed so that a seed builds the same policy however busy the machine is (0: the faster of 1 and all cores, timed during the run, which changed the seed-0 policy from run to run: benchmarks/RESULTS.md, issue 26)"
        },
    )
    environment: str = field(
        default="encyclopedia",
        metadata={"help": "the environment whose scripted agent is cloned (it needs a demonstrator)"},
    )
    base_policy_id: int = field(
        default=0,
        metadata={
            "help": "clone into this registered policy's own model, in its own chat format and tool-call parser (0: build the default architecture from nothing; tokenizer, width and layers then apply)"
        },
    )
    lora_rank: int = field(
        default=0,
        metadata={
            "help": "with base_policy_id: train LoRA adapters of this rank on every linear layer (peft) instead of all the weights, merged into the saved policy (0: all the weights; SmolLM2-135M-Instruct: 16, benchmarks/RESULTS.md, issue 55)"
        },
    )
    lora_alpha: float = field(
        default=32.0, metadata={"help": "LoRA's scale numerator (the update is scaled by alpha / rank)"}
    )
    seed: int = field(default=0, metadata={"help": "data order, demonstrations and initialisation"})
    processes: int = field(
        default=1,
        metadata={
            "help": "data-parallel training processes on the worker (torch.distributed: one per GPU over NCCL, CPU processes over gloo); each takes its share of every batch and the gradients are summed over the whole batch's loss (core/ranks.py), so the loss curve is the one process's (batch_size a multiple of it)"
        },
    )


def demonstrator_choice_problems(config: BCConfig) -> list[str]:
    """What is wrong with the config's choice of demonstrator and demonstrations."""
    problems = []
    if config.demonstrator not in DEMONSTRATORS:
        problems.append(f"demonstrator: one of {', '.join(DEMONSTRATORS)}.")
    if config.demonstrations not in ("all", "successful"):
        problems.append("demonstrations: all or successful.")
    return problems


def lora_problems(config: BCConfig) -> list[str]:
    """What is wrong with the config's LoRA settings."""
    if not config.lora_rank:
        return []
    if not config.base_policy_id:
        return ["lora_rank: LoRA adapts a pretrained model; name it as base_policy_id (or set lora_rank 0)."]
    if config.processes > 1:
        return ["lora_rank: LoRA trains in one process; set processes 1."]
    return lora_settings_problems(config.lora_rank, config.lora_alpha)


def extra_worlds_problem(extra_worlds: int) -> str | None:
    """Why behaviour cloning cannot imitate this many extra worlds (seeds 1, 2, ...), if it cannot."""
    if not 0 <= extra_worlds < FRESH_WORLD_SEED:
        return (
            f"extra_worlds: 0 to {FRESH_WORLD_SEED - 1}; the world of seed {FRESH_WORLD_SEED} is kept fresh "
            f"for RL's checkpoint choice, and seeds from {FRESH_WORLD_SEED + 1} on for evaluation."
        )
    return None


def steps_for_data(config: BCConfig, demonstrations: int) -> tuple[BCConfig, str]:
    """The settings with the steps scaled to the data: at most `max_epochs` passes over the
    demonstrations (a base model fine-tuned 1,300 times over 18 episodes memorises them, and the
    time goes for nothing), with the warm-up a tenth of them and no extension; a line saying so,
    or the settings as they are and ''."""
    from dataclasses import replace

    if config.max_epochs <= 0 or demonstrations <= 0:
        return config, ""
    cap = max(1, -(-int(config.max_epochs * demonstrations) // config.batch_size))
    if cap >= config.max_steps + config.extend_steps:
        return config, ""
    if cap >= config.max_steps:
        return replace(config, extend_steps=cap - config.max_steps), ""
    scaled = replace(config, max_steps=cap, warmup_steps=min(config.warmup_steps, max(1, cap // 10)), extend_steps=0)
    return scaled, (
        f"{demonstrations} demonstrations: {cap} steps ({config.max_epochs:g} passes of batch {config.batch_size}; "
        f"max_steps {config.max_steps} would be {config.max_steps * config.batch_size / demonstrations:.0f} passes), "
        f"warm-up {scaled.warmup_steps}."
    )
