"""Token authentication (`Authorization: Token <key>`) that reads the user's roles in the same query.

Keys are looked up by their sha256 (webapp/tokens.py). Every labeling API call checks a
role; fetching the group names with the token (one query instead of two) is a measurable
share of a request on the labeling hot path.
"""

from __future__ import annotations

from django.contrib.postgres.aggregates import ArrayAgg
from django.db import connection
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from webapp.models import ApiToken
from webapp.tokens import api_token_touch, token_hash


class TokenWithRolesAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key):
        tokens = ApiToken.objects.select_related("user")
        if connection.vendor == "postgresql":
            tokens = tokens.annotate(role_names=ArrayAgg("user__groups__name", default=None))
        token = tokens.filter(key_hash=token_hash(key)).first()
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        if hasattr(token, "role_names"):
            token.user._role_names = {name for name in (token.role_names or []) if name}
        api_token_touch(token)
        return token.user, token
