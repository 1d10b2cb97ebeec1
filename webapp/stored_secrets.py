"""Secrets stored in the database (a judge's API key): encrypted, and never shown back.

Fernet (AES-128-CBC with an HMAC) keyed from SECRET_KEY: a database dump alone does not
give the key away. A rotated SECRET_KEY keeps the old one in SECRET_KEY_FALLBACKS (Django's
own rotation setting): secrets sealed under any of them still open, and new ones are sealed
under the current key (MultiFernet). A secret written under a key that is in neither cannot be
read; the error says to store it again.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from webapp.errors import ArbiterError


def _key(secret_key: str) -> Fernet:
    digest = hashlib.sha256(b"arbiter.stored-secret\0" + secret_key.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def _fernet() -> MultiFernet:
    """Seals with SECRET_KEY; opens with it or any of SECRET_KEY_FALLBACKS."""
    fallbacks = getattr(settings, "SECRET_KEY_FALLBACKS", [])
    return MultiFernet([_key(settings.SECRET_KEY), *(_key(k) for k in fallbacks)])


def secret_seal(value: str) -> str:
    """The value encrypted, for a database column."""
    return _fernet().encrypt(value.encode()).decode()


def secret_open(sealed: str, *, what: str = "the stored secret") -> str:
    """The value back; an ArbiterError when it was sealed under another SECRET_KEY."""
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken:
        raise ArbiterError(
            f"{what} cannot be read: it was stored under a SECRET_KEY that is neither the current one nor in SECRET_KEY_FALLBACKS. Store it again."
        ) from None
