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

from core.configs import add_config_arguments, config_from_arguments
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
from webapp.errors import ArbiterError

# Options kept from before the command's options were made from PipelineConfig's fields.
ALIASES = {"rl_kind": ("--rl",)}
NEGATIONS = {
    "annotator_correct_first": "--annotator-weighted",
    "reward_model_from_policy": "--reward-model-from-scratch",
}


def _pipeline_config(options: dict) -> PipelineConfig:
    """The loop's settings from the command's options, read as the API reads a config
    (core.configs: whole numbers whole, the run overrides strict JSON objects)."""
    ppo_iterations = options.get("ppo_iterations")
    try:
        config = config_from_arguments(PipelineConfig, options)
    except ValueError as exc:
        raise CommandError(" ".join(str(exc).splitlines())) from None
    if ppo_iterations is not None:
        config.ppo = {**config.ppo, "iterations": ppo_iterations}
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
        add_config_arguments(parser, PipelineConfig, aliases=ALIASES, negations=NEGATIONS)
        parser.add_argument(
            "--ppo-iterations",
            default=None,
            help="RL iterations per round, the same as --ppo '{\"iterations\": N}' (default: the RL run's)",
        )
        parser.add_argument("--json", default="", help="also write the before/after table and timings to this file")

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
