"""Fill a campaign with judgements from simulated annotators (marked synthetic everywhere).

python manage.py simulate_annotators --campaign NAME [--annotators 3] [--temperature 1.0]
                                     [--flip 0.0] [--position-bias 0.0] [--seed 0] [--limit N]
"""

from django.core.management.base import BaseCommand, CommandError

from annotate.models import Campaign
from training.simulated_annotators import AnnotatorProfile
from training.simulation import campaign_simulate_labels
from webapp.errors import ArbiterError


class Command(BaseCommand):
    help = "Simulated annotators (AlpacaFarm style) label a campaign through the assignment service."

    def add_arguments(self, parser):
        parser.add_argument("--campaign", required=True)
        parser.add_argument("--annotators", type=int, default=3)
        parser.add_argument("--temperature", type=float, default=1.0)
        parser.add_argument("--flip", type=float, default=0.0)
        parser.add_argument("--position-bias", type=float, default=0.0)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--limit", type=int)
        parser.add_argument(
            "--stored-utility",
            action="store_true",
            help="judge by the utility stored with each trajectory instead of correctness first",
        )

    def handle(
        self, *args, campaign, annotators, temperature, flip, position_bias, seed, limit, stored_utility, **options
    ):
        target = Campaign.objects.filter(name=campaign).first()
        if target is None:
            raise CommandError(f"No campaign named {campaign!r}.")
        if annotators < 1:
            raise CommandError("--annotators must be at least 1.")
        profile = AnnotatorProfile(
            temperature=temperature, flip=flip, position_bias=position_bias, correct_first=not stored_utility
        )
        try:
            n = campaign_simulate_labels(
                campaign=target, annotators=annotators, profile=profile, seed=seed, limit=limit
            )
        except ArbiterError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(self.style.SUCCESS(f"{n} synthetic judgements stored in {campaign!r}."))
