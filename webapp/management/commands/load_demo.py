"""Demo users and a demo campaign, loaded once; prints the users and their passwords.

    python manage.py load_demo

Passwords are generated on first run and kept in the storage folder
(var/demo_users.json, readable by its owner only); later runs print the same ones.
"""
import json
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from webapp.roles import Role, user_role_set

DEMO_USERS = {
    "demo-admin": [Role.ADMIN],
    "demo-researcher": [Role.RESEARCHER],
    "demo-annotator": [Role.ANNOTATOR],
    "demo-annotator2": [Role.ANNOTATOR],
}
DEMO_CAMPAIGN = "Demo: fictional encyclopedia QA"
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
    help = "Create the demo users and the demo campaign (once), and print the users."

    def handle(self, *args, **options):
        from annotate.models import Campaign
        from annotate.services.campaigns import campaign_get_or_create
        from annotate.services.imports import trajectories_import_stream

        passwords = self._passwords()
        User = get_user_model()
        with transaction.atomic():
            for username, roles in DEMO_USERS.items():
                user, created = User.objects.get_or_create(username=username)
                if created:
                    user.set_password(passwords[username])
                    user.save(update_fields=["password"])
                user_role_set(user=user, roles=roles)
            if not Campaign.objects.filter(name=DEMO_CAMPAIGN).exists():
                campaign, _ = campaign_get_or_create(name=DEMO_CAMPAIGN)
                campaign.guidelines = DEMO_GUIDELINES
                campaign.votes_per_comparison = 2
                campaign.dimensions = ["correctness", "efficiency", "grounding"]
                campaign.save()
                sample = Path(settings.BASE_DIR) / "annotate" / "fixtures" / "demo_trajectories.jsonl"
                with sample.open("rb") as stream:
                    report = trajectories_import_stream(stream=stream, campaign=campaign)
                self.stdout.write(
                    f"Demo campaign: {report.created} trajectories, {report.comparisons_created} comparisons."
                )
        self.stdout.write("Demo users (username / password / role):")
        for username, roles in DEMO_USERS.items():
            self.stdout.write(f"  {username:18} {passwords[username]:24} {', '.join(r.value for r in roles)}")

    def _passwords(self) -> dict[str, str]:
        path = settings.VAR_DIR / "demo_users.json"
        stored = json.loads(path.read_text()) if path.exists() else {}
        for username in DEMO_USERS:
            stored.setdefault(username, secrets.token_urlsafe(12))
        path.write_text(json.dumps(stored, indent=2))
        path.chmod(0o600)
        return stored
