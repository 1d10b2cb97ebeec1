"""Demo users and demo data, loaded once; prints the users and their passwords.

    python manage.py load_demo [--policy default-bc] [--tasks 30] [--samples 2]

- `Demo: encyclopedia QA`: trajectories the behaviour-cloned policy generated in the text
  browser (a rollout run, recorded on the Runs page), paired into comparisons for people
  to label. `make run` builds the policy first (`train_policy`).
- `Demo: simulated labels`: scripted agents' trajectories judged by simulated annotators,
  and a dataset snapshot of them, ready for a reward-model run.

Passwords are generated on first run and kept in the storage folder
(var/demo_users.json, readable by its owner only); later runs print the same ones.
"""
import json
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotate.models import Campaign, Policy
from annotate.services.campaigns import campaign_get_or_create
from annotate.services.datasets import SnapshotFilters, snapshot_create
from training.services import campaign_simulate_labels, scripted_trajectories_generate
from training.simulated_annotators import AnnotatorProfile
from webapp.roles import Role, user_role_set
from webapp.runs.services import run_execute, run_launch

DEMO_USERS = {
    "demo-admin": [Role.ADMIN],
    "demo-researcher": [Role.RESEARCHER],
    "demo-annotator": [Role.ANNOTATOR],
    "demo-annotator2": [Role.ANNOTATOR],
}
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


class Command(BaseCommand):
    help = "Create the demo users and demo campaigns (once), and print the users."

    def add_arguments(self, parser):
        parser.add_argument("--policy", default="default-bc", help="policy whose samples fill the demo campaign")
        parser.add_argument("--tasks", type=int, default=30, help="training tasks the policy is run on")
        parser.add_argument("--samples", type=int, default=2, help="episodes per task")

    def handle(self, *args, policy, tasks, samples, **options):
        passwords = self._passwords()
        admin = self._users(passwords)
        if not Campaign.objects.filter(name=DEMO_CAMPAIGN).exists():
            self._policy_campaign(admin, policy, tasks, samples)
        if not Campaign.objects.filter(name=SIMULATED_CAMPAIGN).exists():
            self._simulated_campaign(admin)
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

    def _policy_campaign(self, admin, policy_name, tasks, samples):
        policy = Policy.objects.filter(name=policy_name).exclude(model_dir="").order_by("-created_at").first()
        if policy is None:
            raise CommandError(f"No policy named {policy_name!r} with a model; build it with `manage.py train_policy`.")
        campaign, _ = campaign_get_or_create(name=DEMO_CAMPAIGN)
        campaign.guidelines = DEMO_GUIDELINES
        campaign.votes_per_comparison = 2
        campaign.dimensions = ["correctness", "efficiency", "grounding"]
        campaign.save()
        self.stdout.write(f"Rolling out {policy} on {tasks} tasks x {samples} for the demo campaign ...")
        run = run_launch(kind="rollout", user=admin, name="Demo rollouts", enqueue=False, config={
            "policy_id": policy.pk, "split": "train", "tasks": tasks, "samples_per_task": samples,
            "temperature": 1.0, "campaign_id": campaign.pk})
        run_execute(run_id=run.pk, attempt=run.attempt)
        run.refresh_from_db()
        if run.status != "succeeded":
            campaign.delete()
            raise CommandError(f"The demo rollout run #{run.pk} {run.status}: {run.error}")
        s = run.summary
        self.stdout.write(f"Demo campaign: {s['trajectories']} trajectories from {policy}, {s['comparisons']} "
                          f"comparisons (run #{run.pk}; policy success {s['success']:.0%}).")

    def _simulated_campaign(self, admin):
        with transaction.atomic():
            campaign, _ = campaign_get_or_create(name=SIMULATED_CAMPAIGN)
            campaign.guidelines = DEMO_GUIDELINES
            campaign.votes_per_comparison = 3
            campaign.save()
            report = scripted_trajectories_generate(campaign=campaign, n_tasks=100, samples_per_agent=2, seed=7)
            labels = campaign_simulate_labels(campaign=campaign, annotators=3,
                                              profile=AnnotatorProfile(temperature=1.0, flip=0.1), seed=7)
            snapshot = snapshot_create(name="Demo: simulated labels", campaigns=[campaign], created_by=admin,
                                       filters=SnapshotFilters(include_synthetic=True))
        self.stdout.write(f"Simulated campaign: {report.trajectories} scripted trajectories, {labels} simulated "
                          f"judgements; snapshot #{snapshot.pk} with {snapshot.stats.get('pairs')} pairs.")

    def _passwords(self) -> dict[str, str]:
        path = settings.VAR_DIR / "demo_users.json"
        stored = json.loads(path.read_text()) if path.exists() else {}
        for username in DEMO_USERS:
            stored.setdefault(username, secrets.token_urlsafe(12))
        path.write_text(json.dumps(stored, indent=2))
        path.chmod(0o600)
        return stored
