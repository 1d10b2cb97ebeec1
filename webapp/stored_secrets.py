"""Secrets stored in the database (a judge's API key): encrypted, and never shown back.

Fernet (AES-128-CBC with an HMAC) keyed from SECRET_KEY: a database dump alone does not
give the key away. A secret written under another SECRET_KEY cannot be read; the error
says to store it again.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

from webapp.errors import ArbiterError


def _fernet() -> Fernet:
    digest = hashlib.sha256(b"arbiter.stored-secret\0" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def secret_seal(value: str) -> str:
    """The value encrypted, for a database column."""
    return _fernet().encrypt(value.encode()).decode()


def secret_open(sealed: str, *, what: str = "the stored secret") -> str:
    """The value back; an ArbiterError when it was sealed under another SECRET_KEY."""
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken:
        raise ArbiterError(f"{what} cannot be read: it was stored under another SECRET_KEY. Store it again.") from None
