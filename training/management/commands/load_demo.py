"""Demo users and demo data, made once and completed on every start; prints what is ready
and the users with their passwords.

    python manage.py load_demo [--policy default-bc] [--tasks 30] [--samples 2]

It takes seconds and needs no model, so `make run` calls it before it starts the web server:
- `Demo: scripted agents`: trajectories of two scripted agents (a careful one and a hasty
  one), paired into comparisons for people to label.
- `Demo: simulated labels`: more scripted trajectories judged by simulated annotators, and a
  dataset snapshot of them, ready for a reward-model run.
- `Demo: encyclopedia QA`: the default policy's own trajectories. The policy is trained by a
  behaviour-cloning run on the worker (on the Runs page, with its progress); when that run
  succeeds it queues a rollout run that pairs the policy's episodes into this campaign.
  Every start checks that chain: it launches the training only when no run is queued,
  running or done, and the rollouts only when nothing fills the campaign yet.

Passwords are generated on first run and kept in the storage folder
(var/demo_users.json, readable by its owner only); later runs print the same ones.
"""

import json
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotate.models import Campaign
from annotate.services.campaigns import campaign_get_or_create
from annotate.services.datasets import SnapshotFilters, snapshot_create
from training.policy.services import DEFAULT_POLICY, policy_by_run_ensure
from training.simulated_annotators import AnnotatorProfile
from training.simulation import campaign_simulate_labels, scripted_trajectories_generate
from webapp.errors import ArbiterError
from webapp.roles import Role, user_role_set

DEMO_USERS = {
    "demo-admin": [Role.ADMIN],
    "demo-researcher": [Role.RESEARCHER],
    "demo-annotator": [Role.ANNOTATOR],
    "demo-annotator2": [Role.ANNOTATOR],
}
SCRIPTED_CAMPAIGN = "Demo: scripted agents"
DEMO_CAMPAIGN = "Demo: encyclopedia QA"
SIMULATED_CAMPAIGN = "Demo: simulated labels"
DEMO_GUIDELINES = """\
## What you are judging
Two agents answered the same question by searching and reading a fictional encyclopedia.
Pick the trajectory you would rather trust.

1. **Correct and supported** beats everything: the answer is right *and* a quote from a page
   the agent opened backs it.
2. Then prefer fewer wasted steps and no tool errors.
3. Use *tie* only when neither is better; tick *both bad* when neither should be trusted.
"""
DEMO_DIMENSIONS = [
    {"name": "correctness", "scale": 5, "description": "Is the final answer right and supported by a quote?"},
    {
        "name": "efficiency",
        "scale": 5,
        "description": "Did it get there without wasted searches, loops or tool errors?",
    },
    {"name": "grounding", "scale": 5, "description": "Does every quote come from a page the agent actually opened?"},
]


def simulated_campaign_make(admin):
    """The demo campaign labelled by simulated annotators (three per comparison) and its snapshot:
    (trajectories report, judgements made, snapshot). benchmarks/real_model_judge.py measures a
    judge against it."""
    with transaction.atomic():
        campaign, _ = campaign_get_or_create(name=SIMULATED_CAMPAIGN, created_by=admin)
        campaign.guidelines = DEMO_GUIDELINES
        campaign.votes_per_comparison = 3
        campaign.save()
        report = scripted_trajectories_generate(campaign=campaign, n_tasks=100, samples_per_agent=2, seed=7)
        labels = campaign_simulate_labels(
            campaign=campaign, annotators=3, profile=AnnotatorProfile(temperature=1.0, flip=0.1), seed=7
        )
        snapshot = snapshot_create(
            name="Demo: simulated labels",
            campaigns=[campaign],
            created_by=admin,
            filters=SnapshotFilters(include_synthetic=True),
        )
    return report, labels, snapshot


class Command(BaseCommand):
    help = "Create the demo users and demo campaigns (once), launch what is missing, and print the users."

    def add_arguments(self, parser):
        parser.add_argument(
            "--policy",
            default=DEFAULT_POLICY,
            help="policy whose samples fill the demo campaign (trained by a run if it does not exist)",
        )
        parser.add_argument("--tasks", type=int, default=30, help="training tasks the policy is run on")
        parser.add_argument("--samples", type=int, default=2, help="episodes per task")

    def handle(self, *args, policy, tasks, samples, **options):
        if tasks < 1 or not 1 <= samples <= 64:
            raise CommandError("--tasks: at least 1; --samples: between 1 and 64.")
        passwords = self._passwords()
        admin = self._users(passwords)
        for name, make in (
            (SIMULATED_CAMPAIGN, self._simulated_campaign),
            (SCRIPTED_CAMPAIGN, self._scripted_campaign),
        ):
            campaign = Campaign.objects.filter(name=name).first()
            if campaign is None:
                make(admin)
            else:
                self.stdout.write(f"“{name}”: {campaign.comparisons.count()} comparisons.")
        self._policy_campaign(admin, policy, tasks, samples)
        self.stdout.write("Demo users (username / password / role):")
        for username, roles in DEMO_USERS.items():
            self.stdout.write(f"  {username:18} {passwords[username]:24} {', '.join(r.value for r in roles)}")

    def _users(self, passwords):
        User = get_user_model()
        with transaction.atomic():
            for username, roles in DEMO_USERS.items():
                user, created = User.objects.get_or_create(username=username)
                if created:
                    user.set_password(passwords[username])
                    user.save(update_fields=["password"])
                user_role_set(user=user, roles=roles)
        return User.objects.get(username="demo-admin")

    def _configure(self, campaign: Campaign) -> None:
        campaign.guidelines = DEMO_GUIDELINES
        campaign.votes_per_comparison = 2
        campaign.dimensions = DEMO_DIMENSIONS
        campaign.save()

    def _scripted_campaign(self, admin):
        with transaction.atomic():
            campaign, _ = campaign_get_or_create(name=SCRIPTED_CAMPAIGN, created_by=admin)
            self._configure(campaign)
            report = scripted_trajectories_generate(campaign=campaign, n_tasks=40, samples_per_agent=1, seed=3)
        self.stdout.write(
            f"“{SCRIPTED_CAMPAIGN}”: {report.comparisons} comparisons of a careful and a hasty "
            f"scripted agent, ready to label."
        )

    def _policy_campaign(self, admin, policy_name, tasks, samples):
        with transaction.atomic():
            campaign, created = campaign_get_or_create(name=DEMO_CAMPAIGN, created_by=admin)
            if created:
                self._configure(campaign)
            try:
                policy, run = policy_by_run_ensure(
                    name=policy_name, user=admin, campaign=campaign, tasks=tasks, samples=samples
                )
            except ArbiterError as exc:
                raise CommandError(f"The demo policy {policy_name!r} cannot be made: {exc.message}") from None
        fill = f"its rollouts fill “{DEMO_CAMPAIGN}”"
        if policy is None:
            state = "queued" if run.status == "queued" else f"running, {run.progress:.0%}"
            self.stdout.write(
                f"Policy {policy_name}: training by behaviour cloning in run #{run.pk} ({state}; see "
                f"the Runs page); once it succeeds, {fill}."
            )
        elif run is not None:
            self.stdout.write(f"Policy {policy}: {fill} in run #{run.pk} ({run.status}).")
        else:
            self.stdout.write(
                f"“{DEMO_CAMPAIGN}”: {campaign.comparisons.count()} comparisons of {policy}'s trajectories."
            )

    def _simulated_campaign(self, admin):
        report, labels, snapshot = simulated_campaign_make(admin)
        self.stdout.write(
            f"“{SIMULATED_CAMPAIGN}”: {report.trajectories} scripted trajectories, {labels} simulated "
            f"judgements; snapshot #{snapshot.pk} with {snapshot.stats.get('pairs')} pairs."
        )

    def _passwords(self) -> dict[str, str]:
        path = settings.VAR_DIR / "demo_users.json"
        stored = json.loads(path.read_text()) if path.exists() else {}
        for username in DEMO_USERS:
            stored.setdefault(username, secrets.token_urlsafe(12))
        path.write_text(json.dumps(stored, indent=2))
        path.chmod(0o600)
        return stored
