"""Pair trajectories of the same task into comparisons for a campaign.

    python manage.py make_comparisons --campaign NAME [--strategy all_pairs|outcome_differs|policy_vs_policy|same_calls_different_answer]
                                      [--policy-a ID --policy-b ID] [--max-per-task 10] [--seed 0]

The same build is in the app (a campaign's page, Fill) and the API (POST /api/v1/campaigns/ID/fills/).
"""

from django.core.management.base import BaseCommand, CommandError

from annotate.models import Campaign
from annotate.services.comparisons import STRATEGIES, comparisons_build
from webapp.errors import ArbiterError


class Command(BaseCommand):
    help = "Build comparisons (pairs of different trajectories of one task) in a campaign."

    def add_arguments(self, parser):
        parser.add_argument("--campaign", required=True, help="campaign name")
        parser.add_argument("--strategy", choices=STRATEGIES, default="all_pairs")
        parser.add_argument("--max-per-task", type=int, default=10)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--policy-a", type=int, help="policy_vs_policy: the first policy's id")
        parser.add_argument("--policy-b", type=int, help="policy_vs_policy: the second policy's id")

    def handle(self, *args, campaign: str, strategy: str, max_per_task: int, seed: int, policy_a, policy_b, **options):
        try:
            target = Campaign.objects.get(name=campaign)
        except Campaign.DoesNotExist:
            raise CommandError(f"No campaign named {campaign!r}.") from None
        try:
            n = comparisons_build(
                campaign=target,
                strategy=strategy,
                max_per_task=max_per_task,
                seed=seed,
                policy_a=policy_a,
                policy_b=policy_b,
            )
        except ArbiterError as exc:
            raise CommandError(exc.message) from None
        total = target.comparisons.count()
        self.stdout.write(
            self.style.SUCCESS(f"Built {n} new comparisons in {campaign!r} ({strategy}); it now has {total}.")
        )
