"""A loop's settings: what run_pipeline takes and every round keeps (training/loop/rounds.py
reads them back with `loop_config`). Plain data, so the loop and the pipeline above it share
one definition."""

from __future__ import annotations

from dataclasses import dataclass, field

from training.policy.limits import max_action_tokens_field, max_context_field
from training.simulated_annotators import WRONG_PAIRS

# The loop's baselines (issue 54): each a behaviour cloning of the start's own settings (bc_settings)
# that changes only what is imitated, so it rules out one explanation of a method's gain.
BASELINES = {
    "filtered_bc": ("filtered BC", {"demonstrations": "successful"}),  # better data, no feedback
    "clean_bc": ("clean BC", {"demonstrator": "clean"}),  # what imitation could reach
}


@dataclass
class PipelineConfig:
    name: str = field(
        default="", metadata={"help": "prefix of everything the pipeline creates (default: pipeline-<time>)"}
    )
    environment: str = field(
        default="encyclopedia", metadata={"help": "every stage plays this environment (docs/environments.md)"}
    )
    policy_id: int = field(
        default=0,
        metadata={
            "help": "the policy to improve (0: a policy behaviour-cloned on the environment's demonstrator, trained if missing)"
        },
    )
    bc_base_policy_id: int = field(
        default=0,
        metadata={
            "help": "with policy_id 0 or baselines: clone the demonstrations into this registered chat policy (0: the default architecture)"
        },
    )
    bc_extra_worlds: int = field(
        default=-1,
        metadata={
            "help": "with policy_id 0 or baselines: behaviour cloning also imitates every task of this many other worlds (-1: scaled, enough for about 2,000 demonstrations; 0 where the environment is not built per seed)"
        },
    )
    bc: dict = field(
        default_factory=dict,
        metadata={
            "help": "behaviour cloning run config overrides (the start's with policy_id 0, and every baseline's), e.g. "
            '{"max_steps": 500}; environment, base_policy_id, extra_worlds and seed come from the loop\'s own settings'
        },
    )
    baselines: str = field(
        default="",
        metadata={
            "help": "round one also behaviour-clones these, evaluated in every round beside the rest: filtered_bc (only "
            "the demonstrator's successful episodes), clean_bc (a demonstrator without habits or slips); "
            "comma-separated, none by default (each costs a behaviour cloning of the start's size)"
        },
    )
    rollout_tasks: int = field(
        default=431, metadata={"help": "training tasks the policy is rolled out on (at most all of them)"}
    )
    samples_per_task: int = field(
        default=0,
        metadata={
            "help": "episodes per task, paired into comparisons (0: scaled to the environment, 2 where it has 200+ training tasks, more below)"
        },
    )
    pairing: str = field(
        default="all_pairs",
        metadata={"help": "how a task's episodes are paired (annotate/services/comparisons.py strategies)"},
    )
    answer_branches: int = field(
        default=3,
        metadata={
            "help": "from each episode that answered after reading, this many answers sampled afresh on the same path"
        },
    )
    answer_pairs_per_task: int = field(
        default=2,
        metadata={"help": "up to this many more pairs per task that made the same calls and answered differently"},
    )
    annotators: int = field(default=3, metadata={"help": "simulated annotators, each voting once on every comparison"})
    annotator_temperature: float = field(
        default=1.0, metadata={"help": "Bradley-Terry temperature over the rubric utility"}
    )
    annotator_flip: float = field(default=0.05, metadata={"help": "share of labels each simulated annotator flips"})
    annotator_correct_first: bool = field(
        default=True,
        metadata={
            "help": "a correct answer beats any wrong one, as a person checking answers judges; steps, tool errors "
            "and loops (the rubric's weights) decide between equally correct ones"
        },
    )
    annotator_wrong_pairs: str = field(
        default="tie",
        metadata={
            "choices": WRONG_PAIRS,
            "help": 'with correct_first, what tells two wrong answers apart: "tie" (nothing: both bad), "errors" (tool errors, loops) or "steps" (also length)',
        },
    )
    annotator_correct_weight: float = field(
        default=30.0, metadata={"help": "without correct_first: the utility of a correct answer (the rubric's is 10)"}
    )
    reward_model: dict = field(default_factory=dict, metadata={"help": "reward_model run config overrides"})
    reward_model_from_policy: bool = field(
        default=True,
        metadata={
            "help": "start each reward model from round one's starting policy (WebGPT, InstructGPT), unless `reward_model` names a backbone"
        },
    )
    ppo: dict = field(default_factory=dict, metadata={"help": "ppo run config overrides"})
    upper_bound: bool = field(
        default=False,
        metadata={
            "help": "the ceiling: each method of round one paid by the rubric itself (RL's reward, expert iteration's filter), evaluated beside the rest"
        },
    )
    best_of_n: str = field(default="4", metadata={"help": "best-of-n over the starting policy at these n"})
    eval_tasks: int = field(default=0, metadata={"help": "eval tasks (0: every eval task of the evaluation's world)"})
    eval_samples: int = field(default=2, metadata={"help": "sampled episodes per eval task and system"})
    eval_environment: str = field(
        default="",
        metadata={"help": 'where every round is evaluated ("": the environment\'s unseen variant if it has one)'},
    )
    eval_seen_tasks: int = field(
        default=64,
        metadata={
            "help": "where the loop is evaluated on an unseen world: every system also plays this many held-out tasks "
            "of the world it trained on (no more than eval_tasks), so a gain that is memorisation shows as a gap (0: none)"
        },
    )
    rounds: int = field(
        default=1,
        metadata={"help": "rounds of rollouts, labels, reward model and RL, each from the last round's result"},
    )
    methods: str = field(
        default="rl,expert_iteration",
        metadata={
            "help": "what each round trains from its start with the round's reward model: rl, expert_iteration or both; "
            "the round's result is the kept checkpoint that gains most in dev success at deploy_temperature, every one evaluated"
        },
    )
    deploy_temperature: float = field(
        default=0.0,
        metadata={
            "help": "the temperature the loop's policy is used at (0: greedy), given to both methods: each keeps its "
            "best checkpoint and stops on collapse by dev success at it, and the round keeps the method that gains "
            "most at it (T=1 reported beside). A pool of T=1 and greedy, two sampled episodes per task to one greedy, "
            "let PPO's dev greedy fall from 90.0% to 80.6% by iteration 30 unnoticed (issue 54). Above 0, the "
            "methods' dev episodes are sampled at it (their eval_temperature), besides one greedy episode per task"
        },
    )
    rl_kind: str = field(default="ppo", metadata={"help": "the RL run kind of every round: ppo, rloo or grpo"})
    rl_train_worlds: int = field(
        default=-1,
        metadata={
            "help": "RL also practises on this many other worlds of the environment (-1: a freshly generated world every "
            "iteration where the environment is built per seed, else none)"
        },
    )
    expert_iteration: dict = field(
        default_factory=dict, metadata={"help": "expert_iteration run config overrides (selection, rounds, ...)"}
    )
    compare_dpo: bool = field(
        default=False,
        metadata={
            "help": "per round: simulated corrections of wrong episodes, then SFT and DPO from the round's start on "
            "the round's dataset, evaluated beside RL on the same held-out tasks (docs/corrections.md)"
        },
    )
    corrections: int = field(
        default=60, metadata={"help": "with compare_dpo: wrong episodes per round a simulated annotator corrects"}
    )
    sft: dict = field(default_factory=dict, metadata={"help": "with compare_dpo: sft run config overrides"})
    dpo: dict = field(default_factory=dict, metadata={"help": "with compare_dpo: dpo run config overrides"})
    audit_size: int = field(
        default=24, metadata={"help": "per round: the reward model's favourite episodes shown blind to people"}
    )
    audit_disagreements: int = field(
        default=12, metadata={"help": "per round: labelled pairs the reward model most disagrees with, asked again"}
    )
    max_action_tokens: int = max_action_tokens_field()
    max_context: int = max_context_field()
    seed: int = field(
        default=0,
        metadata={
            "help": "the seed of every stage (with policy_id 0 the behaviour-cloned start too, then named for its seed; rollouts, labels, the reward model, RL, evaluation)"
        },
    )


def bc_settings(config: PipelineConfig) -> dict:
    """The loop's behaviour cloning as bc run settings: the start's (with policy_id 0) and every
    baseline's, which adds only its own change of what is imitated (BASELINES). Built here once, so
    a baseline differs from the start in its data and nothing else."""
    return {
        **config.bc,
        "environment": config.environment,
        "base_policy_id": config.bc_base_policy_id,
        "extra_worlds": config.bc_extra_worlds,
        "seed": config.seed,
    }
