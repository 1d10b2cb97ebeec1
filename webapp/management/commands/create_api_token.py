"""Make an API token for a user and print its key (for scripts that set up a machine).

    python manage.py create_api_token USERNAME [--name NAME]

The key is printed once, alone on its line; Arbiter keeps only its hash. People make
their own tokens on the API tokens page instead.
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.errors import ArbiterError
from webapp.tokens import api_token_create


class Command(BaseCommand):
    help = "Create an API token for a user and print its key (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="command line", help="what the token is for (default: command line)")

    def handle(self, *args, username: str, name: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}; create one with set_role.")
        try:
            _, key = api_token_create(user=user, name=name)
        except ArbiterError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(key)
