"""Reads for the Users pages and API: every user with their roles and counts."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce

from webapp.models import ApiToken
from webapp.roles import Role

User = get_user_model()


def _with_counts(users):
    # Tokens by a subquery: a second join beside the judgements' would multiply the rows.
    tokens = ApiToken.objects.filter(user=OuterRef("pk")).order_by().values("user").annotate(n=Count("pk")).values("n")
    return users.prefetch_related("groups").annotate(
        judgement_count=Count("judgements"), token_count=Coalesce(Subquery(tokens, output_field=IntegerField()), 0)
    )


def role_names(user) -> list[str]:
    """The roles a user's groups give them, whether or not they are active (superusers hold all)."""
    held = {g.name for g in user.groups.all()}
    return [r.value for r in Role if user.is_superuser or r.value in held]


def users_counted():
    """Every user with `judgement_count` and `token_count`, unordered (the API pages it)."""
    return _with_counts(User.objects.all())


def users_list() -> list:
    """Every user, by username, with `role_names`, `judgement_count` and `token_count`."""
    users = list(users_counted().order_by("username"))
    for user in users:
        user.role_names = role_names(user)
    return users


def user_get(user_id: int):
    """One user with the same extras as `users_list`, or None."""
    user = _with_counts(User.objects.filter(pk=user_id)).first()
    if user is not None:
        user.role_names = role_names(user)
    return user
