"""Create a user or change a user's roles.

python manage.py set_role USERNAME annotator [researcher admin] [--password PW]
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from webapp.roles import Role, user_role_set


class Command(BaseCommand):
    help = "Give a user exactly these roles (annotator, researcher, admin); creates the user if needed."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("roles", nargs="+", choices=[r.value for r in Role])
        parser.add_argument("--password", help="set this password (new users without one cannot log in)")

    def handle(self, *args, username: str, roles: list[str], password: str | None, **options):
        user, created = get_user_model().objects.get_or_create(username=username)
        if password:
            user.set_password(password)
            user.save(update_fields=["password"])
        elif created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        user_role_set(user=user, roles=[Role(r) for r in roles])
        verb = "Created" if created else "Updated"
        self.stdout.write(self.style.SUCCESS(f"{verb} {username}: {', '.join(roles)}"))
