"""The whole loop in one command, headless, with a progress bar per stage:

    python manage.py run_pipeline [--upper-bound] [--ppo-iterations 30] [--rollout-tasks 431]

behaviour-cloned policy (trained once, then reused) -> rollouts on the training tasks ->
comparisons -> simulated annotators -> snapshot -> reward model -> PPO against it ->
best-of-n and evaluation on the eval tasks; prints the before/after table. Everything it
makes is an ordinary campaign, snapshot, run, policy and evaluation in the web UI.
"""
import json
import logging

from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse
from tqdm import tqdm

from training.pipeline import PipelineConfig, before_after_rows, format_table, pipeline_problems, run_pipeline
from webapp.errors import ArbiterError


class Command(BaseCommand):
    help = "Run the whole loop (policy, rollouts, labels, reward model, PPO, evaluation) and print before/after."

    def add_arguments(self, parser):
        defaults = PipelineConfig()
        parser.add_argument("--name", default="", help="prefix of what it creates (default pipeline-<time>)")
        parser.add_argument("--policy-id", type=int, default=0,
                            help="the policy to improve (default: the behaviour-cloned default policy)")
        parser.add_argument("--environment", default=defaults.environment,
                            help="the environment every stage plays (a built-in, configured or installed one)")
        parser.add_argument("--rollout-tasks", type=int, default=defaults.rollout_tasks)
        parser.add_argument("--samples-per-task", type=int, default=defaults.samples_per_task)
        parser.add_argument("--annotators", type=int, default=defaults.annotators)
        parser.add_argument("--annotator-weighted", action="store_false", dest="annotator_correct_first",
                            help="simulated annotators judge by one weighted utility instead of correctness first")
        parser.add_argument("--annotator-correct-weight", type=float, default=defaults.annotator_correct_weight,
                            help="with --annotator-weighted: the utility of a correct answer (the rubric's is 10)")
        parser.add_argument("--ppo-iterations", type=int, default=None, help="PPO iterations (default: the PPO run's)")
        parser.add_argument("--ppo", default="{}", help="PPO run config overrides, as JSON")
        parser.add_argument("--reward-model", default="{}", help="reward-model run config overrides, as JSON")
        parser.add_argument("--upper-bound", action="store_true", help="also PPO against the rubric itself")
        parser.add_argument("--best-of-n", default=defaults.best_of_n, help="best-of-n at these n, e.g. 2,4")
        parser.add_argument("--eval-tasks", type=int, default=defaults.eval_tasks, help="0: all eval tasks")
        parser.add_argument("--eval-samples", type=int, default=defaults.eval_samples)
        parser.add_argument("--seed", type=int, default=defaults.seed)
        parser.add_argument("--json", default="", help="also write the before/after table and timings to this file")

    def handle(self, *args, **options):
        try:
            ppo, reward_model = json.loads(options["ppo"]), json.loads(options["reward_model"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--ppo and --reward-model take JSON objects: {exc}") from None
        if options["ppo_iterations"] is not None:
            ppo["iterations"] = options["ppo_iterations"]
        config = PipelineConfig(
            name=options["name"], environment=options["environment"], policy_id=options["policy_id"],
            rollout_tasks=options["rollout_tasks"], samples_per_task=options["samples_per_task"],
            annotators=options["annotators"], annotator_correct_weight=options["annotator_correct_weight"],
            annotator_correct_first=options["annotator_correct_first"],
            reward_model=reward_model, ppo=ppo, upper_bound=options["upper_bound"],
            best_of_n=options["best_of_n"], eval_tasks=options["eval_tasks"], eval_samples=options["eval_samples"],
            seed=options["seed"])
        problems = pipeline_problems(config)
        if problems:
            raise CommandError(" ".join(problems))
        bars: list[tqdm] = []

        def stage(title: str):
            for bar in bars:
                bar.close()
            bar = tqdm(total=100, desc=title, unit="%", leave=True, bar_format="{desc:<32}{percentage:3.0f}%|{bar}| "
                                                                               "{elapsed} {postfix}")
            bars.append(bar)

            def progress(fraction: float, message: str = "") -> None:
                percent = round(100 * min(1.0, max(0.0, fraction)))
                if percent != bar.n or message != getattr(bar, "last_message", None):
                    bar.n = percent
                    bar.last_message = message
                    bar.set_postfix_str((message or "")[:60], refresh=True)
            return progress

        logging.getLogger("webapp.runs.services").setLevel(logging.WARNING)  # the bars say it; the run pages keep the log
        try:
            result = run_pipeline(config, stage=stage, log=lambda line: None)
        except ArbiterError as exc:
            raise CommandError(str(exc)) from None
        finally:
            for bar in bars:
                bar.close()
        rows = before_after_rows(result.evaluation)
        self.stdout.write("")
        self.stdout.write(f"Before/after on {result.evaluation.config['tasks']} eval tasks "
                          f"({result.evaluation.config['samples']} samples per task at temperature "
                          f"{result.evaluation.config['temperature']:g}, and greedy); 95% intervals over tasks:")
        self.stdout.write(format_table(rows))
        ppo = result.runs["ppo"].summary
        self.stdout.write(f"\nPPO: {ppo['message']} Best checkpoint by dev rubric: iteration {ppo['best_iteration']}.")
        rm = result.runs["reward_model"].summary
        if rm.get("accuracy") is not None:
            self.stdout.write(f"Reward model: held-out accuracy {rm['accuracy']:.1%}.")
        self.stdout.write("Stage seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in result.seconds.items())
                          + f"; total {sum(result.seconds.values()):.0f}.")
        self.stdout.write(self.style.SUCCESS(
            f"Dashboard: {reverse('training:evaluation', args=[result.evaluation.pk])}"))
        if options["json"]:
            with open(options["json"], "w") as handle:
                json.dump({"rows": rows, "seconds": result.seconds, "ppo": ppo, "reward_model": rm,
                           "evaluation_id": result.evaluation.pk}, handle, indent=2, default=str)
