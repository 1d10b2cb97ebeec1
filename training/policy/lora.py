"""LoRA (peft) for fine-tuning a pretrained policy: one definition of the adapters for behaviour
cloning (training/policy/bc.py) and for TRL's SFT and DPO (training/finetune/train.py).

The adapters are low-rank updates of every linear layer but the output head (peft's
"all-linear"); the base weights stay frozen. Once training ends they are merged into the
weights (`merged`), so what is saved is a plain model of the same architecture: it plays,
serves and trains again as any other policy, with nothing of peft needed to load it.
"""

from __future__ import annotations

LORA_TARGETS = "all-linear"


def lora_settings_problems(rank: int, alpha: float) -> list[str]:
    """What is wrong with LoRA settings whatever trains them (ranges are each config's own)."""
    return ["lora_alpha: above 0 with LoRA."] if rank and alpha <= 0 else []


def lora_config(rank: int, alpha: float, dropout: float = 0.0):
    from peft import LoraConfig

    return LoraConfig(
        r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=LORA_TARGETS, task_type="CAUSAL_LM"
    )


def with_lora(model, rank: int, alpha: float, dropout: float = 0.0):
    """The model with fresh adapters of this rank; only they train."""
    from peft import get_peft_model

    return get_peft_model(model, lora_config(rank, alpha, dropout))


def with_lora_if_asked(model, rank: int, alpha: float, log=print):
    """The model with fresh adapters of `rank`, saying how many parameters train; itself at rank 0."""
    if not rank:
        return model
    model = with_lora(model, rank, alpha)
    counts = parameter_counts(model)
    log(
        f"LoRA of rank {rank} on every linear layer: {counts['trainable']:,} of {counts['total']:,} "
        "parameters train; the adapters are merged into the saved policy."
    )
    return model


def is_lora(model) -> bool:
    return hasattr(model, "merge_and_unload") and hasattr(model, "peft_config")


def merged(model):
    """The plain model with the adapters folded into its weights (the model itself without any)."""
    return model.merge_and_unload() if is_lora(model) else model


def parameter_counts(model) -> dict[str, int]:
    """{"trainable": ..., "total": ...} parameters of the model."""
    return {
        "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "total": sum(p.numel() for p in model.parameters()),
    }
