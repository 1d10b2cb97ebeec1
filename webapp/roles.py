"""Roles as groups with permissions.

annotator: labels comparisons. researcher: reads campaigns and judgements, creates and
downloads datasets. admin: everything, including the Django admin. Groups and their
permissions are (re)created after every `migrate`, so a new permission reaches its
role without a data migration.
"""

from __future__ import annotations

from enum import StrEnum

from django.contrib.auth.models import Group, Permission

from webapp.models import pseudonym_for


class Role(StrEnum):
    ANNOTATOR = "annotator"
    RESEARCHER = "researcher"
    ADMIN = "admin"


# Apps whose model permissions researchers may view and admins may change.
DOMAIN_APPS = ("annotate", "rewardmodel", "training")

ROLE_PERMISSIONS: dict[Role, list[str]] = {
    Role.ANNOTATOR: ["webapp.label_comparisons"],
    Role.RESEARCHER: ["webapp.download_datasets"],
    Role.ADMIN: [
        "webapp.label_comparisons",
        "webapp.download_datasets",
        "webapp.launch_runs",
        "webapp.import_trajectories",
        "webapp.manage_campaigns",
    ],
}


def _permissions(codenames: list[str]) -> list[Permission]:
    found = []
    for dotted in codenames:
        app_label, codename = dotted.split(".")
        found.extend(Permission.objects.filter(content_type__app_label=app_label, codename=codename))
    return found


def roles_sync() -> None:
    """Create the three groups and give each exactly its permissions."""
    for role in Role:
        group, _ = Group.objects.get_or_create(name=role.value)
        perms = _permissions(ROLE_PERMISSIONS[role])
        domain = Permission.objects.filter(content_type__app_label__in=DOMAIN_APPS)
        if role is Role.RESEARCHER:
            perms.extend(domain.filter(codename__startswith="view_"))
        if role is Role.ADMIN:
            perms.extend(domain)
            # Users, groups and API tokens in the Django admin.
            perms.extend(Permission.objects.filter(content_type__app_label="auth", content_type__model="group"))
            perms.extend(
                Permission.objects.filter(
                    content_type__app_label="webapp", content_type__model__in=["user", "apitoken"]
                )
            )
        group.permissions.set(perms)


def user_roles(user) -> set[Role]:
    """The roles a user holds; a superuser holds all of them."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return set()
    if user.is_superuser:
        return set(Role)
    # Cached on the user object, which lives for one request (or was filled by the
    # token authentication's query).
    if not hasattr(user, "_role_names"):
        user._role_names = {g.name for g in user.groups.all()}
    return {role for role in Role if role.value in user._role_names}


def user_has_role(user, *roles: Role) -> bool:
    """True when the user holds any of `roles`."""
    return bool(user_roles(user) & set(roles))


def user_role_set(*, user, roles: list[Role]) -> None:
    """Give a user exactly these roles; admins also get access to the Django admin."""
    groups = [Group.objects.get_or_create(name=r.value)[0] for r in roles]
    user.groups.set(groups)
    user.__dict__.pop("_role_names", None)
    user.is_staff = Role.ADMIN in roles or user.is_superuser
    user.save(update_fields=["is_staff"])


def annotator_label(viewer, user_id: int, username: str) -> str:
    """How a person who judged is named to `viewer`: by username to admins (they manage the
    team), by pseudonym to everyone else, as in the API and the exports. The one rule for every
    page where judgements are read."""
    return username if user_has_role(viewer, Role.ADMIN) else pseudonym_for(user_id)
