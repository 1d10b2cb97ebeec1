"""Token authentication (`Authorization: Token <key>`): once per request, cached for a bounded time.

Keys are looked up by their sha256 (webapp/tokens.py), with the user's role names in the
same query. Every labeling API call checks a role, and a labeler's script calls the API in
a loop, so a lookup is kept for `TOKEN_CACHE_SECONDS` (default 5) in the process that
made it:

- Revocation bound: a revoked token, a deactivated or deleted user, or changed roles take
  effect in every process within `TOKEN_CACHE_SECONDS`; in the process that made the change
  (revoking on the tokens page or API, saving a user, changing their groups) at once, since
  those signals empty this process's cache. `TOKEN_CACHE_SECONDS=0` turns the cache off.
- Each request gets its own copy of the user and token rows, so nothing one request sets on
  them reaches another.
- Failed lookups are not cached (a wrong key costs a query, never memory), and the cache
  holds at most `_MAX_ENTRIES` keys.

A request is authenticated at most once: the short labeling path (annotate/api_fast.py)
leaves its result on the request, and DRF's authentication reads it when the request falls
through to the DRF view.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.contrib.postgres.aggregates import ArrayAgg
from django.db import connection
from django.db.models.signals import m2m_changed, post_delete, post_save
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from webapp.db import instance_from_values, instance_values
from webapp.models import ApiToken, User
from webapp.tokens import api_token_touch, token_hash

_MAX_ENTRIES = 10_000
_REQUEST_ATTR = "_arbiter_token_auth"

_lock = threading.Lock()
_cache: dict[str, tuple[float, dict, dict, frozenset]] = {}  # key hash -> (until, user, token, roles)


def token_cache_clear(**_signal_kwargs) -> None:
    """Forget every cached lookup in this process (a token, user or role changed)."""
    with _lock:
        _cache.clear()


post_delete.connect(token_cache_clear, sender=ApiToken, dispatch_uid="webapp.token_cache.token_deleted")
post_save.connect(token_cache_clear, sender=User, dispatch_uid="webapp.token_cache.user_saved")
post_delete.connect(token_cache_clear, sender=User, dispatch_uid="webapp.token_cache.user_deleted")
m2m_changed.connect(token_cache_clear, sender=User.groups.through, dispatch_uid="webapp.token_cache.groups_changed")


def _lookup(key_hash: str) -> tuple[dict, dict, frozenset]:
    tokens = ApiToken.objects.select_related("user")
    if connection.vendor == "postgresql":
        tokens = tokens.annotate(role_names=ArrayAgg("user__groups__name", default=None))
    token = tokens.filter(key_hash=key_hash).first()
    if token is None:
        raise exceptions.AuthenticationFailed("Invalid token.")
    if not token.user.is_active:
        raise exceptions.AuthenticationFailed("User inactive or deleted.")
    if hasattr(token, "role_names"):
        roles = frozenset(name for name in (token.role_names or []) if name)
    else:
        roles = frozenset(token.user.groups.values_list("name", flat=True))
    api_token_touch(token)
    return instance_values(token.user), instance_values(token), roles


def token_authenticate(key: str) -> tuple[User, ApiToken]:
    """The key's user and token, fresh objects for this request; AuthenticationFailed otherwise."""
    key_hash, now, ttl = token_hash(key), time.monotonic(), settings.TOKEN_CACHE_SECONDS
    entry = _cache.get(key_hash)
    if entry is not None and entry[0] > now:
        _, user_row, token_row, roles = entry
    else:
        user_row, token_row, roles = _lookup(key_hash)
        if ttl > 0:
            with _lock:
                if len(_cache) >= _MAX_ENTRIES:
                    _cache.clear()
                _cache[key_hash] = (now + ttl, user_row, token_row, roles)
    user, token = instance_from_values(User, user_row), instance_from_values(ApiToken, token_row)
    user._role_names = set(roles)
    token.user = user
    return user, token


def request_token_authenticate(request, key: str) -> tuple[User, ApiToken] | None:
    """`token_authenticate` for a Django request, once per request: the result (or the
    refusal) is kept on the request for DRF's authentication of the same request."""
    try:
        result = token_authenticate(key)
    except exceptions.AuthenticationFailed as exc:
        setattr(request, _REQUEST_ATTR, (key, exc))
        raise
    setattr(request, _REQUEST_ATTR, (key, result))
    return result


class TokenWithRolesAuthentication(TokenAuthentication):
    def authenticate(self, request):
        self._request = request._request
        try:
            return super().authenticate(request)
        finally:
            self._request = None

    def authenticate_credentials(self, key):
        done = getattr(getattr(self, "_request", None), _REQUEST_ATTR, None)
        if done is not None and done[0] == key:
            if isinstance(done[1], exceptions.AuthenticationFailed):
                raise done[1]
            return done[1]
        return token_authenticate(key)
