"""Build the default policy from nothing: tokenizer, a ~5M-parameter Llama-style model,
behaviour cloning on scripted demonstrations, and its eval success rates.

    python manage.py train_policy [--force] [--max-seconds 240] [--max-steps 700]

The policy is saved under var/policies/default-bc/ (a Hugging Face model directory) and
registered as policy `default-bc`; later runs reuse it unless --force. This trains in the
foreground; `make run` trains the same policy as a `bc` run on its worker instead
(`load_demo`), so the app answers while it trains.
"""

from dataclasses import replace

from django.core.management.base import BaseCommand
from tqdm import tqdm

from training.policy.bc import BCConfig
from training.policy.services import policy_train_default


class Command(BaseCommand):
    help = "Train the default policy by behaviour cloning (once) and report its eval success."

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="train again even if it exists")
        parser.add_argument("--max-seconds", type=float, default=BCConfig.max_seconds)
        parser.add_argument("--max-steps", type=int, default=BCConfig.max_steps)

    def handle(self, *args, force, max_seconds, max_steps, **options):
        config = replace(BCConfig(), max_seconds=max_seconds, max_steps=max_steps)
        bar = tqdm(total=100, desc="behaviour cloning", unit="%", leave=True)

        def progress(fraction):
            percent = round(100 * fraction)
            if percent != bar.n:  # redraw only when the figure changes
                bar.n = percent
                bar.refresh()

        policy = policy_train_default(config=config, force=force, progress=progress, log=lambda m: self.stdout.write(m))
        bar.close()
        report = policy.metadata or {}
        evaluation = report.get("eval", {})
        for name, label in (("greedy", "greedy"), ("t1", "temperature 1")):
            if name in evaluation:
                e = evaluation[name]
                self.stdout.write(
                    f"  eval success, {label}: {e['success']:.1%} ± {1.96 * e['stderr']:.1%} ({e['tasks']} tasks)"
                )
        self.stdout.write(self.style.SUCCESS(f"Policy {policy.name}@{policy.version} in {policy.model_dir}"))
