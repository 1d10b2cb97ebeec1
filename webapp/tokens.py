"""API tokens: each user creates, lists and revokes their own; admins see and revoke anyone's."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from core import json_input
from webapp.errors import ArbiterError
from webapp.limits import person_lock
from webapp.models import ApiToken

MAX_TOKENS_PER_USER = 50
LAST_USED_RESOLUTION = timedelta(minutes=1)  # at most one write per token a minute on the hot path


def token_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@transaction.atomic
def api_token_create(*, user, name: str, by=None) -> tuple[ApiToken, str]:
    """A new token for `user`, made by themselves or (`by`) an admin; returns the row and the
    key, which is never shown again. The one way a token is made: the account page, the team
    page and both APIs call it."""
    name = (name or "").strip()
    if not name:
        raise ArbiterError("Give the token a name (what will use it: a script, a notebook, ...).")
    if len(name) > 100:
        raise ArbiterError("A token name has at most 100 characters.")
    try:
        json_input.check(name)
    except json_input.JsonInputError as exc:
        raise ArbiterError(f"The token name cannot be stored: {exc}.") from None
    person_lock(user)  # counted and written one request at a time: a burst stays within the limit
    if ApiToken.objects.filter(user=user).count() >= MAX_TOKENS_PER_USER:
        who = "You have" if by is None or by.pk == user.pk else f"{user.username} has"
        raise ArbiterError(f"{who} {MAX_TOKENS_PER_USER} tokens already; revoke one first.")
    key = secrets.token_hex(20)
    token = ApiToken.objects.create(user=user, name=name, key_hash=token_hash(key), prefix=key[:8])
    return token, key


def api_token_revoke(*, user, token_id: int) -> bool:
    """Revoke one of `user`'s tokens; False when they have none with that id."""
    return ApiToken.objects.filter(pk=token_id, user=user).delete()[0] > 0


def api_tokens_of(user):
    return ApiToken.objects.filter(user=user).order_by("-created_at")


def api_token_touch(token: ApiToken) -> None:
    """Record use, at most once a minute per token."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
