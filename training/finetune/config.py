"""The settings of an SFT or DPO run (plain Python). Defaults are those measured on the default
policy in the loop's comparison (benchmarks/RESULTS.md, issue 33); a Hugging Face chat model
of a billion parameters wants a learning rate nearer 1e-5 and a few epochs."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.config_ranges import out_of_range
from training.policy.lora import lora_settings_problems

DPO_SOURCES = ("all", "corrections", "pairs")
DPO_LOSSES = ("sigmoid", "ipo", "hinge")


def _help(text: str) -> dict:
    return {"help": text}


@dataclass
class FinetuneConfig:
    learning_rate: float = field(
        default=3e-4,
        metadata=_help(
            "AdamW learning rate (constant). SFT of the default policy on the loop's corrections: 3e-4 was best of "
            "1e-4, 3e-4 and 1e-3 on dev tasks (1e-3 collapsed; benchmarks/RESULTS.md, issue 33)."
        ),
    )
    epochs: float = field(default=3.0, metadata=_help("Passes over the training rows (steps are counted from it)."))
    max_steps: int = field(default=0, metadata=_help("Stop after this many optimizer steps (0: the epochs decide)."))
    batch_size: int = field(default=8, metadata=_help("Rows per optimizer step."))
    weight_decay: float = field(default=0.0, metadata=_help("AdamW weight decay."))
    grad_clip: float = field(default=1.0, metadata=_help("Gradient norm clipping (0: none)."))
    checkpoint_every: int = field(
        default=50, metadata=_help("Save a checkpoint every this many steps, to resume from (0: none).")
    )
    threads: int = field(default=0, metadata=_help("torch threads on a CPU worker (0: torch's choice)."))
    activation_checkpointing: bool = field(
        default=False,
        metadata=_help(
            "Recompute activations in the backward pass: less GPU memory for a large model, about a third more "
            "compute (TRL's default is on; off here, where the default policy is small)."
        ),
    )
    seed: int = field(default=0, metadata=_help("Seed of the shuffling and of anything random in training."))
    lora_rank: int = field(
        default=0,
        metadata=_help(
            "LoRA (peft): train low-rank adapters of this rank on every linear layer instead of all the weights "
            "(0: full fine-tuning). The adapters are merged into the saved policy, so it serves and plays as any "
            "other. A pretrained model of 100M+ parameters: 16 (benchmarks/RESULTS.md, issue 55)."
        ),
    )
    lora_alpha: float = field(
        default=32.0, metadata=_help("LoRA's scale numerator: the adapters' update is scaled by alpha / rank.")
    )
    lora_dropout: float = field(default=0.0, metadata=_help("Dropout on the adapters' input (0: none)."))

    def steps_for(self, rows: int) -> int:
        """Optimizer steps for `rows` training rows."""
        if self.max_steps:
            return self.max_steps
        return max(1, int(-(-rows * self.epochs // self.batch_size)))

    def validate(self) -> list[str]:
        problems = out_of_range(
            self,
            {
                "learning_rate": (0, 1),
                "epochs": (0, 1000),
                "max_steps": (0, 1_000_000),
                "batch_size": (1, 4096),
                "weight_decay": (0, 1),
                "grad_clip": (0, 1000),
                "checkpoint_every": (0, 1_000_000),
                "threads": (0, 256),
                "lora_rank": (0, 4096),
                "lora_alpha": (0, 1_000_000),
                "lora_dropout": (0, 0.99),
            },
        )
        if not problems and self.learning_rate <= 0:
            problems.append("learning_rate: must be positive.")
        if not problems and not self.max_steps and self.epochs <= 0:
            problems.append("epochs: above 0 (or max_steps).")
        if not problems:
            problems += lora_settings_problems(self.lora_rank, self.lora_alpha)
        return problems


@dataclass
class DPOSettings:
    beta: float = field(
        default=0.1, metadata=_help("DPO's beta: how far from the starting policy the preferences may pull it.")
    )
    loss_type: str = field(default="sigmoid", metadata=_help("sigmoid (DPO), ipo or hinge (TRL's losses)."))
    source: str = field(
        default="all",
        metadata=_help(
            "What DPO learns from: 'all' (corrections against their originals, and the comparisons' preferred "
            "sides), 'corrections' or 'pairs'."
        ),
    )

    def validate(self) -> list[str]:
        problems = [] if 0 < self.beta <= 100 else ["beta: above 0, at most 100."]
        if self.loss_type not in DPO_LOSSES:
            problems.append(f"loss_type: one of {', '.join(DPO_LOSSES)}.")
        if self.source not in DPO_SOURCES:
            problems.append(f"source: one of {', '.join(DPO_SOURCES)}.")
        return problems
