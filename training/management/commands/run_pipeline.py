"""The whole loop in one command, headless, with a progress bar per stage:

    python manage.py run_pipeline [--rounds 2] [--rl ppo|rloo|grpo] [--upper-bound] [--ppo-iterations 30]
        [--baselines filtered_bc,clean_bc]

behaviour-cloned policy (trained once, then reused), then per round: rollouts on the
training tasks -> comparisons -> simulated annotators -> dataset of every label so far ->
reward model -> RL against it (KL to round one's start) -> evaluation on held-out tasks (an
unseen world where the environment has one; best-of-n in round one) -> the blind audit of
what the reward model scores highest. Prints the before/after table of the last round and
the loop's per-round figures. Everything it makes is an ordinary campaign, snapshot, run,
policy and evaluation in the web UI, and the loop goes on from the dashboard's "next round".
"""

import json
import logging

from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse
from tqdm import tqdm

from core import json_input
from training.evaluation.selectors import evaluation_report
from training.loop.report import format_rounds, loop_baselines_report, loop_report
from training.pipeline import (
    PipelineConfig,
    before_after_rows,
    format_head_to_head,
    format_table,
    pipeline_plan,
    pipeline_problems,
    run_pipeline,
)
from training.policy.limits import add_limit_arguments
from training.simulated_annotators import WRONG_PAIRS
from webapp.errors import ArbiterError


def _add_policy_arguments(parser, defaults: PipelineConfig) -> None:
    """The policy the loop starts from and where it plays."""
    parser.add_argument("--name", default="", help="prefix of what it creates (default pipeline-<time>)")
    parser.add_argument(
        "--policy-id",
        type=int,
        default=0,
        help="the policy to improve (default: the behaviour-cloned default policy)",
    )
    parser.add_argument(
        "--bc-base-policy-id",
        type=int,
        default=0,
        help="without --policy-id: clone the environment's demonstrations into this registered "
        "chat policy, in its own format (default: build the default architecture)",
    )
    parser.add_argument(
        "--bc-extra-worlds",
        type=int,
        default=defaults.bc_extra_worlds,
        help="behaviour cloning also imitates every task of this many other worlds (-1: scaled "
        "to about 2,000 demonstrations; 0 where the environment is not built per seed)",
    )
    parser.add_argument(
        "--bc",
        default="{}",
        help="behaviour cloning run config overrides, as JSON: the start's (without --policy-id) and every "
        "baseline's, e.g. '{\"max_steps\": 500}'",
    )
    parser.add_argument(
        "--baselines",
        default=defaults.baselines,
        help="round one also behaviour-clones these, evaluated in every round: filtered_bc (the demonstrator's "
        "successful episodes only), clean_bc (a demonstrator without habits or slips); comma-separated (default: "
        "none, each costs a behaviour cloning)",
    )
    parser.add_argument(
        "--environment",
        default=defaults.environment,
        help="the environment every stage plays (a built-in, configured or installed one)",
    )


def _add_label_arguments(parser, defaults: PipelineConfig) -> None:
    """Rollouts, their pairing and the simulated annotators."""
    parser.add_argument("--rollout-tasks", type=int, default=defaults.rollout_tasks)
    parser.add_argument(
        "--samples-per-task",
        type=int,
        default=defaults.samples_per_task,
        help="episodes per task, paired into comparisons (0: scaled to the environment's size)",
    )
    parser.add_argument(
        "--pairing",
        default=defaults.pairing,
        help="how a task's episodes are paired: all_pairs, outcome_differs or same_calls_different_answer",
    )
    parser.add_argument(
        "--answer-branches",
        type=int,
        default=defaults.answer_branches,
        help="answers sampled afresh on the path of each episode that answered after reading (0: none; docs/loop.md)",
    )
    parser.add_argument(
        "--answer-pairs-per-task",
        type=int,
        default=defaults.answer_pairs_per_task,
        help="more pairs per task that made the same calls and answered differently",
    )
    parser.add_argument("--annotators", type=int, default=defaults.annotators)
    parser.add_argument(
        "--annotator-weighted",
        action="store_false",
        dest="annotator_correct_first",
        help="simulated annotators judge by one weighted utility instead of correctness first",
    )
    parser.add_argument(
        "--annotator-wrong-pairs",
        default=defaults.annotator_wrong_pairs,
        choices=WRONG_PAIRS,
        help="what tells two wrong answers apart for the simulated annotators: nothing (a tie, "
        "both bad), their tool errors and loops, or their steps too",
    )
    parser.add_argument(
        "--annotator-correct-weight",
        type=float,
        default=defaults.annotator_correct_weight,
        help="with --annotator-weighted: the utility of a correct answer (the rubric's is 10)",
    )


def _add_training_arguments(parser, defaults: PipelineConfig) -> None:
    """Rounds, the methods, and the runs' config overrides."""
    parser.add_argument(
        "--rounds",
        type=int,
        default=defaults.rounds,
        help="rounds of rollouts, labels, reward model and RL, each from the last one's result",
    )
    parser.add_argument("--rl", default=defaults.rl_kind, help="the RL run kind of every round: ppo, rloo or grpo")
    parser.add_argument(
        "--rl-train-worlds",
        type=int,
        default=defaults.rl_train_worlds,
        help="RL also practises on this many other worlds of the environment "
        "(-1: a freshly generated world every iteration where it is built per seed, else none)",
    )
    parser.add_argument(
        "--methods",
        default=defaults.methods,
        help="what each round trains with its reward model: rl, expert_iteration or both (default); the round "
        "keeps the checkpoint that gains most on dev",
    )
    parser.add_argument(
        "--deploy-temperature",
        type=float,
        default=defaults.deploy_temperature,
        help="the temperature the result is used at (0: greedy): both methods keep their best checkpoint and the "
        "round keeps a method by dev success at it, not by a mix with T=1 (issue 54: PPO's dev greedy fell from "
        "90.0%% to 80.6%% unnoticed)",
    )
    parser.add_argument("--expert-iteration", default="{}", help="expert_iteration run config overrides, as JSON")
    parser.add_argument(
        "--ppo-iterations", type=int, default=None, help="RL iterations per round (default: the RL run's)"
    )
    parser.add_argument("--ppo", default="{}", help="RL run config overrides, as JSON")
    parser.add_argument("--reward-model", default="{}", help="reward-model run config overrides, as JSON")
    parser.add_argument(
        "--reward-model-from-scratch",
        action="store_false",
        dest="reward_model_from_policy",
        help="train each reward model from scratch instead of from round one's starting policy",
    )
    parser.add_argument(
        "--upper-bound",
        action="store_true",
        help="the ceiling: round one's methods also paid by the rubric itself, evaluated beside the rest",
    )
    parser.add_argument(
        "--compare-dpo",
        action="store_true",
        help="per round: a simulated annotator corrects wrong episodes, then SFT and DPO from the round's start "
        "on the round's dataset, evaluated beside RL on the same held-out tasks (docs/corrections.md)",
    )
    parser.add_argument(
        "--corrections", type=int, default=defaults.corrections, help="with --compare-dpo: corrections per round"
    )
    parser.add_argument("--sft", default="{}", help="with --compare-dpo: SFT run config overrides, as JSON")
    parser.add_argument("--dpo", default="{}", help="with --compare-dpo: DPO run config overrides, as JSON")


def _add_evaluation_arguments(parser, defaults: PipelineConfig) -> None:
    """The evaluation, the audit, the limits and the outputs."""
    parser.add_argument("--best-of-n", default=defaults.best_of_n, help="best-of-n at these n, e.g. 2,4")
    parser.add_argument("--eval-tasks", type=int, default=defaults.eval_tasks, help="0: all eval tasks")
    parser.add_argument("--eval-samples", type=int, default=defaults.eval_samples)
    parser.add_argument(
        "--eval-seen-tasks",
        type=int,
        default=defaults.eval_seen_tasks,
        help="held-out tasks of the training world each system also plays, beside the unseen world (0: none)",
    )
    parser.add_argument(
        "--eval-environment",
        default=defaults.eval_environment,
        help="where each round is evaluated (default: the environment's unseen variant if any)",
    )
    parser.add_argument(
        "--audit-size",
        type=int,
        default=defaults.audit_size,
        help="per round: the reward model's favourite episodes put to a blind audit",
    )
    parser.add_argument(
        "--audit-disagreements",
        type=int,
        default=defaults.audit_disagreements,
        help="per round: labelled pairs the reward model most disagrees with, asked again",
    )
    add_limit_arguments(parser, max_action_tokens=defaults.max_action_tokens, max_context=defaults.max_context)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--json", default="", help="also write the before/after table and timings to this file")


def _pipeline_config(options: dict) -> PipelineConfig:
    """The loop's settings from the command's options (the JSON overrides read strictly)."""
    try:
        ppo, reward_model = json_input.loads(options["ppo"]), json_input.loads(options["reward_model"])
        sft, dpo = json_input.loads(options["sft"]), json_input.loads(options["dpo"])
        expert_iteration, bc = json_input.loads(options["expert_iteration"]), json_input.loads(options["bc"])
    except json_input.JsonInputError as exc:
        raise CommandError(
            f"--ppo, --expert-iteration, --reward-model, --sft, --dpo and --bc take JSON objects: {exc}"
        ) from None
    if not all(isinstance(o, dict) for o in (ppo, reward_model, sft, dpo, expert_iteration, bc)):
        raise CommandError(
            "--ppo, --expert-iteration, --reward-model, --sft, --dpo and --bc take JSON objects, "
            "e.g. '{\"iterations\": 20}'."
        )
    if options["ppo_iterations"] is not None:
        ppo["iterations"] = options["ppo_iterations"]
    config = PipelineConfig(
        name=options["name"],
        environment=options["environment"],
        policy_id=options["policy_id"],
        rollout_tasks=options["rollout_tasks"],
        samples_per_task=options["samples_per_task"],
        pairing=options["pairing"],
        answer_branches=options["answer_branches"],
        answer_pairs_per_task=options["answer_pairs_per_task"],
        annotators=options["annotators"],
        annotator_correct_weight=options["annotator_correct_weight"],
        annotator_correct_first=options["annotator_correct_first"],
        annotator_wrong_pairs=options["annotator_wrong_pairs"],
        reward_model=reward_model,
        reward_model_from_policy=options["reward_model_from_policy"],
        ppo=ppo,
        upper_bound=options["upper_bound"],
        compare_dpo=options["compare_dpo"],
        corrections=options["corrections"],
        sft=sft,
        dpo=dpo,
        best_of_n=options["best_of_n"],
        eval_tasks=options["eval_tasks"],
        eval_samples=options["eval_samples"],
        eval_seen_tasks=options["eval_seen_tasks"],
        eval_environment=options["eval_environment"],
        rounds=options["rounds"],
        rl_kind=options["rl"],
        rl_train_worlds=options["rl_train_worlds"],
        methods=options["methods"],
        deploy_temperature=options["deploy_temperature"],
        expert_iteration=expert_iteration,
        audit_size=options["audit_size"],
        audit_disagreements=options["audit_disagreements"],
        bc_base_policy_id=options["bc_base_policy_id"],
        bc_extra_worlds=options["bc_extra_worlds"],
        bc=bc,
        baselines=options["baselines"],
        max_action_tokens=options["max_action_tokens"],
        max_context=options["max_context"],
        seed=options["seed"],
    )
    return config


def _percent(value) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _progress_bars() -> tuple:
    """(stage, close): `stage(title)` opens a bar for a stage and returns its progress callback."""
    bars: list[tqdm] = []

    def stage(title: str):
        for bar in bars:
            bar.close()
        bar = tqdm(
            total=100,
            desc=title,
            unit="%",
            leave=True,
            bar_format="{desc:<32}{percentage:3.0f}%|{bar}| {elapsed} {postfix}",
        )
        bars.append(bar)

        def progress(fraction: float, message: str = "") -> None:
            percent = round(100 * min(1.0, max(0.0, fraction)))
            if percent != bar.n or message != getattr(bar, "last_message", None):
                bar.n = percent
                bar.last_message = message
                bar.set_postfix_str((message or "")[:60], refresh=True)

        return progress

    def close() -> None:
        for bar in bars:
            bar.close()

    return stage, close


class Command(BaseCommand):
    help = "Run the whole loop (policy, rollouts, labels, reward model, PPO, evaluation) and print before/after."

    def add_arguments(self, parser):
        defaults = PipelineConfig()
        for add in (_add_policy_arguments, _add_label_arguments, _add_training_arguments, _add_evaluation_arguments):
            add(parser, defaults)

    def handle(self, *args, **options):
        config, notes = pipeline_plan(_pipeline_config(options))
        problems = pipeline_problems(config)
        if problems:
            raise CommandError("Nothing was started: " + " ".join(problems))
        for note in notes:
            self.stdout.write(f"Plan: {note}")
        stage, close_bars = _progress_bars()
        # The bars say what the runs' log lines would; the run pages keep the log.
        logging.getLogger("webapp.runs.services").setLevel(logging.WARNING)
        try:
            result = run_pipeline(config, stage=stage, log=lambda line: None)
        except ArbiterError as exc:
            raise CommandError(str(exc)) from None
        finally:
            close_bars()
        self._report(result, config, options)

    def _report(self, result, config: PipelineConfig, options: dict) -> None:
        """The before/after table, the rounds, the RL summary and the timings; the JSON file."""
        rows = before_after_rows(result.evaluation)
        evaluation = result.evaluation
        self.stdout.write("")
        self.stdout.write(
            f"Before/after, round {len(result.rounds)}, on {evaluation.config['tasks']} eval tasks of "
            f"{evaluation.config.get('environment', 'encyclopedia')} "
            f"({evaluation.config['samples']} samples per task at temperature "
            f"{evaluation.config['temperature']:g}, and greedy); 95% intervals over tasks:"
        )
        self.stdout.write(format_table(rows))
        report = loop_report(result.rounds[-1].loop)
        baselines = loop_baselines_report(result.rounds[-1].loop)
        self.stdout.write("\n" + format_rounds(report, baselines))
        last = result.rounds[-1]
        rl = last.rl_run.summary
        self.stdout.write(f"\n{last.rl_run.kind.upper()}: {rl['message']}")
        choice = last.choice or {}
        if choice.get("chosen"):
            self.stdout.write(
                f"The round kept {choice['chosen']}: {choice['rule']}; "
                + "; ".join(
                    f"{m['kind']} {_percent(m['start_dev_deploy'])} -> {_percent(m['dev_deploy'])}"
                    for m in choice["methods"]
                )
                + "."
            )
        head_to_head = evaluation_report(evaluation)["head_to_head"]
        if config.compare_dpo:
            self.stdout.write("\nHead to head on the same held-out tasks (success, B - A, 95% interval over tasks):")
            self.stdout.write(format_head_to_head(head_to_head))
        accuracy = ((last.reward_model.metrics or {}).get("test") or {}).get("accuracy")
        if accuracy is not None:
            self.stdout.write(f"Reward model: held-out accuracy {accuracy:.1%}.")
        self.stdout.write(
            "Stage seconds: "
            + ", ".join(f"{k} {v:.0f}" for k, v in result.seconds.items())
            + f"; total {sum(result.seconds.values()):.0f}."
        )
        self.stdout.write(self.style.SUCCESS(f"Dashboard: {reverse('training:evaluation', args=[evaluation.pk])}"))
        if options["json"]:
            with open(options["json"], "w") as handle:
                json.dump(
                    {
                        "rows": rows,
                        "seconds": result.seconds,
                        "rounds": report,
                        "baselines": baselines,
                        "rl": rl,
                        "head_to_head": head_to_head,
                        "direct": {
                            kind: run.summary
                            for kind, run in (("sft", last.sft_run), ("dpo", last.dpo_run))
                            if run is not None
                        },
                        "reward_model": last.reward_model.metrics,
                        "evaluation_id": evaluation.pk,
                    },
                    handle,
                    indent=2,
                    default=str,
                )
