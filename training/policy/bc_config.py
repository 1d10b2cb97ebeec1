"""Behaviour-cloning settings, apart from the training code so the web process can read them
(to validate a launch) without importing torch."""
from __future__ import annotations

from dataclasses import dataclass, field

from training.envs.base import FRESH_WORLD_SEED
from training.envs.encyclopedia.scripted import Mistakes


@dataclass
class BCConfig:
    """Behaviour cloning settings; every field is saved beside the model."""

    demos_per_task: int = 1  # scripted episodes per training task of the main world
    extra_worlds: int = 20  # also one episode on every task of this many other generated worlds (seeds 1-20): more names than it can memorise, so it learns to read (benchmarks/RESULTS.md, issue 16)
    mistakes: Mistakes = field(default_factory=lambda: Mistakes(0.1, 0.1, 0.08, 0.05))  # the demonstrator's error rates
    vocab_size: int = 1024  # BPE vocabulary (at 2,048 held-out names become single tokens never seen in training)
    hidden: int = 128  # model width (0.9M parameters with 4 layers: about 3x the steps of hidden 192 x 6 in the budget)
    layers: int = 4  # transformer blocks
    heads: int = 4  # attention heads
    learning_rate: float = 3e-3  # AdamW peak learning rate (3e-3 with 100 warm-up steps: the policy learns to read on every seed tried; 2e-3 with 30 on 2 of 3, benchmarks/RESULTS.md)
    warmup_steps: int = 100  # linear warm-up, then cosine decay
    batch_size: int = 16  # episodes per optimizer step
    max_steps: int = 1500  # optimizer steps: training is bounded by steps, so a busy machine trains as fully as a fast one
    max_seconds: float = 0.0  # an optional wall-time cut (0: none, the default); the learning rate anneals to whichever limit comes first
    budget_seconds: float = 600.0  # training longer than this is reported loudly (the policy is still complete); 0: never
    observation_loss_weight: float = 0.5  # weight of the language-model loss on environment tokens
    first_action_weight: float = 2.0  # loss weight of the first action's tokens (the search that copies the question)
    grad_clip: float = 1.0  # gradient norm clip
    threads: int = 1  # torch threads while training, fixed so that a seed builds the same policy however busy the machine is (0: the faster of 1 and all cores, timed during the run, which changed the seed-0 policy from run to run: benchmarks/RESULTS.md, issue 26)
    environment: str = "encyclopedia"  # the environment whose scripted agent is cloned (it needs a demonstrator)
    base_policy_id: int = 0  # clone into this registered policy's own model, in its own chat format and tool-call parser (0: build the default architecture from nothing; tokenizer, width and layers then apply)
    seed: int = 0  # data order, demonstrations and initialisation


def extra_worlds_problem(extra_worlds: int) -> str | None:
    """Why behaviour cloning cannot imitate this many extra worlds (seeds 1, 2, ...), if it cannot."""
    if not 0 <= extra_worlds < FRESH_WORLD_SEED:
        return (f"extra_worlds: 0 to {FRESH_WORLD_SEED - 1}; the world of seed {FRESH_WORLD_SEED} is kept fresh "
                f"for RL's checkpoint choice, and seeds from {FRESH_WORLD_SEED + 1} on for evaluation.")
    return None
