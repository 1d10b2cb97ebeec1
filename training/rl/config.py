"""RL and expert-iteration settings, apart from the training code so the web process can
validate a launch without importing torch. Every field is saved beside each checkpoint."""

from __future__ import annotations

from dataclasses import dataclass, field

from training.policy.limits import limits_problems, max_action_tokens_field, max_context_field

ALGORITHMS = ("ppo", "rloo", "grpo")
LOSS_AGGREGATIONS = ("token", "episode")
MAX_DEPLOY_TEMPERATURE = 2.0
DEPLOY_TEMPERATURE_HELP = (
    "the temperature the policy is used at (0: greedy): the best checkpoint, the collapse stop and the loop's "
    "choice between methods compare dev success at it, with T=1 reported beside. A pool of T=1 and greedy "
    "episodes (two sampled per task to one greedy) let PPO's dev greedy fall from 90.0% to 80.6% by iteration 30 "
    "without the collapse stop firing (issue 54), while a user deploys greedy or one chosen temperature"
)


def deploy_words(temperature: float) -> str:
    """The deploy temperature in words, as messages and summaries name it: "greedy" or "T=0.7"."""
    return "greedy" if temperature == 0 else f"T={temperature:g}"


def deploy_temperature_problems(temperature: float) -> list[str]:
    """What is wrong with a deploy temperature (the RL, expert-iteration and loop settings share it)."""
    if not 0 <= temperature <= MAX_DEPLOY_TEMPERATURE:
        return [f"deploy_temperature: 0 (greedy) to {MAX_DEPLOY_TEMPERATURE:g}."]
    return []


@dataclass
class RLConfig:
    """Multi-turn PPO settings (training/rl/trainer.py)."""

    algorithm: str = field(
        default="ppo",
        metadata={"help": "ppo (a value head, per-token GAE), rloo or grpo (group_size samples per task, no critic)"},
    )
    group_size: int = field(
        default=4, metadata={"help": "rloo and grpo: samples per task in a batch, compared with each other"}
    )
    iterations: int = field(
        default=30, metadata={"help": "iterations: one batch of episodes, then `epochs` passes over it"}
    )
    episodes_per_iteration: int = field(
        default=64, metadata={"help": "episodes per batch, on as many different training tasks"}
    )
    minibatch_size: int = field(default=16, metadata={"help": "episodes per optimizer step"})
    epochs: int = field(default=2, metadata={"help": "passes over each batch"})
    learning_rate: float = field(
        default=1e-4, metadata={"help": "AdamW learning rate of the policy and its value head"}
    )
    temperature: float = field(
        default=1.0, metadata={"help": "sampling temperature of the rollouts (log-probs are taken at it too)"}
    )
    kl_coef: float = field(
        default=0.02, metadata={"help": "per-token KL penalty against the reference policy (WebGPT: 0.02)"}
    )
    kl_budget: float = field(
        default=12.0,
        metadata={
            "help": "stop once the median episode's KL passes this many nats (0: never; WebGPT ~10-12; the median, so one derailed sample does not stop a run)"
        },
    )
    clip_range: float = field(default=0.2, metadata={"help": "PPO's policy ratio clip"})
    value_clip_range: float = field(default=0.2, metadata={"help": "clip of the value change per update"})
    vf_coef: float = field(
        default=0.1, metadata={"help": "weight of the value loss (the value head shares the policy's trunk)"}
    )
    entropy_coef: float = field(default=0.0, metadata={"help": "weight of the entropy bonus"})
    gamma: float = field(default=1.0, metadata={"help": "discount per agent token"})
    lam: float = field(
        default=1.0,
        metadata={
            "help": "GAE lambda (1: every agent token gets the episode's whole return against its value; at 0.95 the score at an episode's end reached a derailing token 300 tokens earlier as 0.95^300, and PPO against the rubric ran off: docs/ppo.md)"
        },
    )
    loss_aggregation: str = field(
        default="episode",
        metadata={
            "help": "token: every agent token of a minibatch weighs the same in the losses; episode: every episode weighs the same (GRPO's sequence mean), so a long derailed episode cannot drown out the short ones"
        },
    )
    value_warmup: int = field(
        default=0,
        metadata={
            "help": "ppo: iterations at the start in which only the value head learns (the policy does not move)"
        },
    )
    grad_clip: float = field(default=1.0, metadata={"help": "gradient norm clip"})
    ensemble_penalty: float = field(
        default=1.0,
        metadata={
            "help": "against a reward-model ensemble: the score is the members' mean minus this times their spread (0: the mean)"
        },
    )
    normalize_scores: bool = field(
        default=True,
        metadata={
            "help": "scale scores by the mean and spread of the first batch's (kl_coef then means the same for any scorer)"
        },
    )
    invalid_action_penalty: float = field(
        default=0.0,
        metadata={
            "help": "rubric shaping: subtracted per invalid action (off by default; reported as objective/shaping)"
        },
    )
    tool_error_penalty: float = field(
        default=0.5,
        metadata={
            "help": "subtracted (in units of the first batch's score spread) per call the environment answered with an error (a failed quote, a bad argument): something every environment reports, not the answer key; against the loop's reward model tool errors had doubled (benchmarks/RESULTS.md, issue 26; reported in objective/shaping)"
        },
    )
    eval_every: int = field(
        default=5, metadata={"help": "iterations between dev-rubric evaluations, each with a checkpoint (0: none)"}
    )
    eval_samples: int = field(default=2, metadata={"help": "episodes per dev task at each evaluation"})
    dev_tasks: int = field(
        default=160,
        metadata={
            "help": "at most this many dev tasks, a fixed sample (0: all); from a fresh dev world, tasks of every split (none is trained on)"
        },
    )
    eval_temperature: float = field(default=1.0, metadata={"help": "sampling temperature of the dev evaluations"})
    eval_greedy: bool = field(
        default=True,
        metadata={
            "help": "each dev evaluation also plays one greedy episode per task (always when deploy_temperature is 0)"
        },
    )
    deploy_temperature: float = field(default=0.0, metadata={"help": DEPLOY_TEMPERATURE_HELP})
    best_margin: float = field(
        default=2.0,
        metadata={
            "help": "a checkpoint becomes the best only when its dev success at deploy_temperature beats the best's by this many standard errors of the difference"
        },
    )
    checkpoint_every: int = field(
        default=0, metadata={"help": "extra checkpoints between evaluations (0: only at evaluations)"}
    )
    overoptimization_tolerance: float = field(
        default=0.05,
        metadata={"help": "dev success may fall this much below the best while the score rises before it is flagged"},
    )
    collapse_drop: float = field(
        default=0.05,
        metadata={
            "help": "stop the run once dev success at deploy_temperature is this far below the start's, beyond best_margin standard errors (0: never)"
        },
    )
    rollout_batch_size: int = field(default=64, metadata={"help": "episodes decoded together in a rollout"})
    max_action_tokens: int = max_action_tokens_field()
    max_context: int = max_context_field()
    max_seconds: float = field(
        default=0.0, metadata={"help": "stop after this wall time, with a checkpoint (0: no limit)"}
    )
    threads: int = field(default=0, metadata={"help": "torch threads (0: torch's default)"})
    seed: int = field(default=0, metadata={"help": "task order, sampling and minibatch order"})
    processes: int = field(
        default=1,
        metadata={
            "help": "data-parallel processes on the worker (torch.distributed: one per GPU over NCCL, CPU processes over gloo): each plays, scores and trains on its share of every batch (whole task groups for rloo and grpo), gradients summed, so the steps are one process's"
        },
    )

    def validate(self) -> list[str]:
        problems = []
        problems += limits_problems(self)
        for name in (
            "iterations",
            "episodes_per_iteration",
            "minibatch_size",
            "epochs",
            "eval_samples",
            "rollout_batch_size",
        ):
            if getattr(self, name) < 1:
                problems.append(f"{name}: at least 1.")
        if not self.learning_rate > 0:
            problems.append("learning_rate: must be positive.")
        if self.kl_coef < 0:
            problems.append("kl_coef: 0 or more (0 turns the KL penalty off).")
        for name in (
            "kl_budget",
            "ensemble_penalty",
            "dev_tasks",
            "value_warmup",
            "temperature",
            "eval_temperature",
            "entropy_coef",
            "vf_coef",
            "max_seconds",
            "best_margin",
            "invalid_action_penalty",
            "tool_error_penalty",
            "overoptimization_tolerance",
            "collapse_drop",
            "eval_every",
            "checkpoint_every",
            "threads",
        ):
            if getattr(self, name) < 0:
                problems.append(f"{name}: 0 or more.")
        if self.temperature == 0:
            problems.append("temperature: PPO samples its episodes, so above 0.")
        if not 0 < self.clip_range < 1 or not self.value_clip_range > 0:
            problems.append("clip_range: between 0 and 1; value_clip_range: above 0.")
        if not 0 <= self.gamma <= 1 or not 0 <= self.lam <= 1:
            problems.append("gamma and lam: between 0 and 1.")
        if not self.grad_clip > 0:
            problems.append("grad_clip: must be positive.")
        if not 1 <= self.processes <= 64:
            problems.append("processes: 1 to 64.")
        elif self.processes > 1:
            group = self.group_size if self.algorithm != "ppo" and self.group_size > 0 else 1
            if self.episodes_per_iteration // group < self.processes:
                problems.append(
                    f"processes: each of the {self.processes} processes plays at least one task of a batch; "
                    f"episodes_per_iteration {self.episodes_per_iteration} has {self.episodes_per_iteration // group}."
                )
        problems += deploy_temperature_problems(self.deploy_temperature)
        if self.minibatch_size > self.episodes_per_iteration:
            problems.append("minibatch_size: at most episodes_per_iteration.")
        if self.loss_aggregation not in LOSS_AGGREGATIONS:
            problems.append(f"loss_aggregation: one of {', '.join(LOSS_AGGREGATIONS)}.")
        if self.algorithm not in ALGORITHMS:
            problems.append(f"algorithm: one of {', '.join(ALGORITHMS)}.")
        elif self.algorithm != "ppo" and (self.group_size < 2 or self.episodes_per_iteration % self.group_size):
            problems.append(
                "group_size: at least 2, and episodes_per_iteration a multiple of it (rloo and grpo "
                "compare the samples of one task)."
            )
        return problems


SELECTIONS = ("rubric", "reward_model", "majority")


@dataclass
class ExpertIterationConfig:
    """Expert-iteration settings; saved beside every round's checkpoint."""

    rounds: int = field(default=4, metadata={"help": "rounds of sample, select, fine-tune"})
    tasks_per_round: int = field(default=256, metadata={"help": "training tasks sampled each round"})
    samples: int = field(default=4, metadata={"help": "episodes per task each round, the favourite kept"})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature of the rounds' episodes"})
    selection: str = field(
        default="reward_model",
        metadata={
            "help": "which sample of a task is kept: 'rubric' (a correct one: the ceiling), 'reward_model' (the highest score) or 'majority' (the answer most samples gave, then the reward model)"
        },
    )
    keep_top: float = field(
        default=1.0,
        metadata={
            "help": "reward_model and majority: keep only this share of the round's favourites, the ones the reward model scores highest (1: all; the scale of a reward model's scores means nothing, their order does)"
        },
    )
    learning_rate: float = field(default=1e-4, metadata={"help": "AdamW peak learning rate of each round"})
    epochs: float = field(
        default=2.0, metadata={"help": "passes over each round's examples (kept episodes and anchors)"}
    )
    batch_size: int = field(default=16, metadata={"help": "episodes per optimizer step"})
    anchor_mix: float = field(
        default=1.0,
        metadata={"help": "behaviour-cloning examples mixed in per kept episode, against forgetting (0: none)"},
    )
    observation_loss_weight: float = field(
        default=0.5,
        metadata={
            "help": "weight of the language-model loss on environment tokens (behaviour cloning's; at 0, with a learning rate of 2e-4, the default policy's greedy dev success fell 14 points in 8 rounds: benchmarks/RESULTS.md, issue 43)"
        },
    )
    eval_samples: int = field(default=2, metadata={"help": "episodes per dev task at each evaluation"})
    eval_temperature: float = field(default=1.0, metadata={"help": "sampling temperature of the dev evaluations"})
    eval_greedy: bool = field(
        default=True,
        metadata={"help": "each dev evaluation also plays one greedy episode (always when deploy_temperature is 0)"},
    )
    deploy_temperature: float = field(default=0.0, metadata={"help": DEPLOY_TEMPERATURE_HELP})
    best_margin: float = field(
        default=2.0,
        metadata={
            "help": "a round becomes the best only when its dev success at deploy_temperature beats the best's by this many standard errors"
        },
    )
    rollout_batch_size: int = field(default=64, metadata={"help": "episodes decoded together"})
    max_action_tokens: int = field(default=48, metadata={"help": "tokens one turn may generate"})
    max_context: int = field(default=1536, metadata={"help": "episode length that ends as truncated"})
    threads: int = field(default=1, metadata={"help": "torch threads"})
    seed: int = field(default=0, metadata={"help": "task order, sampling and data order"})

    def validate(self) -> list[str]:
        problems = []
        for name in ("rounds", "tasks_per_round", "samples", "batch_size", "eval_samples", "rollout_batch_size"):
            if getattr(self, name) < 1:
                problems.append(f"{name}: at least 1.")
        for name in ("anchor_mix", "observation_loss_weight", "best_margin", "threads", "eval_temperature"):
            if getattr(self, name) < 0:
                problems.append(f"{name}: 0 or more.")
        if not self.learning_rate > 0 or not self.epochs > 0:
            problems.append("learning_rate and epochs: above 0.")
        if not self.temperature > 0:
            problems.append("temperature: above 0 (the samples of a task must differ).")
        problems += deploy_temperature_problems(self.deploy_temperature)
        if self.selection not in SELECTIONS:
            problems.append(f"selection: one of {', '.join(SELECTIONS)}.")
        if not 0 < self.keep_top <= 1:
            problems.append("keep_top: above 0 and at most 1.")
        for name, most in (("rounds", 1000), ("tasks_per_round", 100_000), ("samples", 64), ("batch_size", 4096)):
            if getattr(self, name) > most:
                problems.append(f"{name}: at most {most}.")
        return problems
