"""Team management: admins create, invite and deactivate users, give roles, reset passwords, manage tokens.

Users are never deleted (their judgements point at them): a user who leaves is
deactivated, which stops their sessions and tokens at once and keeps their work. The
checks here (names, emails, roles, passwords) are shared by the Users pages and the
REST API, so both say the same thing; each failure is an `ArbiterError` with a message
for the admin.
"""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from core import json_input
from core.problems import problem
from webapp.errors import ArbiterError
from webapp.roles import Role, user_role_set

User = get_user_model()

USERNAME_MAX = 150  # the column's length
EMAIL_MAX = 254
PASSWORD_MAX = 4096  # a password is hashed, not stored; the bound keeps hashing cheap
ALLOWED_USERNAME = "letters, digits and the characters @ . + - _ (no spaces)"


# Checks shared by the pages and the API.


def _username_checked(username: str) -> str:
    username = (username or "").strip()
    if not username:
        raise ArbiterError("Give the user a username.", details=[problem("required", field="username")])
    if len(username) > USERNAME_MAX:
        raise ArbiterError(
            f"A username has at most {USERNAME_MAX} characters.",
            details=[problem(f"at most {USERNAME_MAX} characters", field="username")],
        )
    try:
        User.username_validator(username)
    except ValidationError:
        raise ArbiterError(
            f"The username {username!r} is not allowed: use only {ALLOWED_USERNAME}.",
            details=[problem(f"use only {ALLOWED_USERNAME}", field="username")],
        ) from None
    if User.objects.filter(username__iexact=username).exists():
        raise ArbiterError(
            f"A user named {username!r} already exists; choose another username.",
            details=[problem("already taken", field="username")],
        )
    return username


def _email_checked(email: str) -> str:
    email = (email or "").strip()
    if not email:
        return ""
    if len(email) > EMAIL_MAX:
        raise ArbiterError(
            f"An email address has at most {EMAIL_MAX} characters.",
            details=[problem(f"at most {EMAIL_MAX} characters", field="email")],
        )
    try:
        validate_email(email)
    except ValidationError:
        raise ArbiterError(
            f"{email!r} is not an email address (like name@example.org).",
            details=[problem("not an email address", field="email")],
        ) from None
    return User.objects.normalize_email(email)


def roles_parse(names) -> list[Role]:
    """Role names (strings or `Role`s) as roles, each once, in a stable order."""
    allowed = ", ".join(r.value for r in Role)
    if isinstance(names, str) or not isinstance(names, (list, tuple, set)):
        raise ArbiterError(
            f"Give the roles as a list; the roles are {allowed}.",
            details=[problem("a list of role names", field="roles")],
        )
    values = [r.value for r in Role]
    unknown = [str(n) for n in names if not isinstance(n, str) or n not in values]
    if unknown:
        raise ArbiterError(
            f"{unknown[0][:40]!r} is not a role; the roles are {allowed}.",
            details=[problem(f"the roles are {allowed}", field="roles")],
        )
    return [r for r in Role if r.value in names]


def _password_checked(password: str, user) -> str:
    if len(password) > PASSWORD_MAX:
        raise ArbiterError(
            f"A password has at most {PASSWORD_MAX} characters.",
            details=[problem(f"at most {PASSWORD_MAX} characters", field="password")],
        )
    try:
        json_input.check(password)  # NUL or a lone surrogate would fail in the hasher, as a 500
    except json_input.JsonInputError as exc:
        reason = str(exc).removeprefix("the top level: ")
        raise ArbiterError(
            f"The password cannot be used: it {reason}.", details=[problem(reason, field="password")]
        ) from None
    try:
        password_validation.validate_password(password, user)
    except ValidationError as exc:
        problems = list(exc.messages)
        raise ArbiterError(
            "The password is not accepted: " + " ".join(problems),
            details=[problem(m, field="password") for m in problems],
        ) from None
    return password


def _refuse_self(*, actor, user, doing: str) -> None:
    if actor is not None and actor.pk == user.pk:
        raise ArbiterError(f"You cannot {doing} yourself: ask another admin to do it.")


# Creating users.


def _user_new(*, username: str, email: str, roles) -> tuple[User, list[Role]]:
    """A new, unsaved user and their roles, checked; the caller sets the password."""
    return User(username=_username_checked(username), email=_email_checked(email)), roles_parse(roles)


def _user_save(user, roles: list[Role]) -> None:
    try:
        with transaction.atomic():  # a savepoint: a race on the name is a clear error, not a 500
            user.save()
    except IntegrityError:
        raise ArbiterError(
            f"A user named {user.username!r} already exists; choose another username.",
            details=[problem("already taken", field="username")],
        ) from None
    user_role_set(user=user, roles=roles)


def password_generate() -> str:
    """A random password of 16 URL-safe characters (about 96 bits)."""
    return secrets.token_urlsafe(12)


@transaction.atomic
def user_create(
    *, username: str, email: str = "", roles: list[str] | tuple = (), password: str | None = None
) -> tuple[User, str]:
    """A new user who can log in at once; returns the user and the password (`password`, or a generated one)."""
    user, parsed = _user_new(username=username, email=email, roles=roles)
    password = password_generate() if password is None else _password_checked(password, user)
    user.set_password(password)
    _user_save(user, parsed)
    return user, password


@transaction.atomic
def user_invite(*, username: str, email: str = "", roles: list[str] | tuple = ()) -> tuple[User, str]:
    """A new user with no usable password; returns the user and the path of their one-time set-password link."""
    user, parsed = _user_new(username=username, email=email, roles=roles)
    user.set_unusable_password()
    _user_save(user, parsed)
    return user, password_link_path(user)


def password_link_path(user) -> str:
    """The path of a one-time link where `user` sets their password (Django's password reset check).

    The link stops working once used, once the password changes another way, or after
    settings.PASSWORD_RESET_TIMEOUT (3 days by default).
    """
    return reverse(
        "password_reset_confirm",
        kwargs={
            "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
            "token": default_token_generator.make_token(user),
        },
    )


# Changing users.


@transaction.atomic
def user_roles_change(*, actor, user, roles) -> User:
    """Give `user` exactly `roles`; an admin cannot take their own admin role."""
    parsed = roles_parse(roles)
    if actor is not None and actor.pk == user.pk and Role.ADMIN not in parsed:
        raise ArbiterError(
            "You cannot take your own admin role: ask another admin to do it.",
            details=[problem("you cannot take your own admin role", field="roles")],
        )
    user_role_set(user=user, roles=parsed)
    return user


@transaction.atomic
def user_email_change(*, user, email: str) -> User:
    user.email = _email_checked(email)
    user.save(update_fields=["email"])
    return user


@transaction.atomic
def user_deactivate(*, actor, user) -> User:
    """The user can no longer log in or use their tokens; their judgements and runs stay."""
    _refuse_self(actor=actor, user=user, doing="deactivate")
    if user.is_active:
        user.is_active = False
        user.save(update_fields=["is_active"])
    return user


@transaction.atomic
def user_reactivate(*, user) -> User:
    """The user can log in again with the password and tokens they had."""
    if not user.is_active:
        user.is_active = True
        user.save(update_fields=["is_active"])
    return user


@transaction.atomic
def user_update(*, actor, user, email: str | None = None, roles=None, is_active: bool | None = None) -> User:
    """Change what is given (None leaves a field as it is); all or nothing."""
    if email is not None:
        user_email_change(user=user, email=email)
    if roles is not None:
        user_roles_change(actor=actor, user=user, roles=roles)
    if is_active is False:
        user_deactivate(actor=actor, user=user)
    elif is_active is True:
        user_reactivate(user=user)
    return user


# Passwords.


@transaction.atomic
def user_password_set(*, user, password: str) -> User:
    """Set `password`, checked by the site's password validators; the user's other sessions end."""
    user.set_password(_password_checked(password, user))
    user.save(update_fields=["password"])
    return user


@transaction.atomic
def user_password_reset_link(*, user) -> str:
    """Void the current password and return the path of a one-time set-password link.

    Making a new link voids the earlier ones (the link's check covers the password).
    """
    user.set_unusable_password()
    user.save(update_fields=["password"])
    return password_link_path(user)
