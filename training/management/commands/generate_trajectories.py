"""Scripted agents act in the encyclopedia environment; their trajectories are stored.

python manage.py generate_trajectories --tasks 50 [--campaign NAME] [--split train] [--samples 1] [--seed 0]
"""

from django.core.management.base import BaseCommand, CommandError

from annotate.services.campaigns import campaign_get_or_create
from training.simulation import SCRIPTED_AGENTS, scripted_trajectories_generate
from webapp.errors import ArbiterError


class Command(BaseCommand):
    help = f"Store trajectories of the scripted agents ({', '.join(SCRIPTED_AGENTS)}) on encyclopedia tasks."

    def add_arguments(self, parser):
        parser.add_argument("--tasks", type=int, default=50)
        parser.add_argument("--campaign", help="build comparisons in this campaign (created if missing)")
        parser.add_argument("--split", choices=["train", "dev", "eval"], default="train")
        parser.add_argument("--samples", type=int, default=1, help="episodes per agent and task")
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, tasks, campaign, split, samples, seed, **options):
        try:
            target = campaign_get_or_create(name=campaign)[0] if campaign else None
            report = scripted_trajectories_generate(
                campaign=target, n_tasks=tasks, split=split, samples_per_agent=samples, seed=seed
            )
        except ArbiterError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Stored {report.trajectories} trajectories ({report.duplicates} already stored), "
                f"{report.success_rate:.0%} correct; {report.comparisons} comparisons built."
            )
        )
