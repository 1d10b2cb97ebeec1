"""The shared base model and the user model every app builds on."""
from __future__ import annotations

import hashlib
import hmac

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models


class BaseModel(models.Model):
    """Every row knows when it was created and last changed (UTC)."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class User(AbstractUser):
    """A person, or a simulated annotator (`is_synthetic`), who works in Arbiter.

    Roles are groups (annotator, researcher, admin): see webapp/roles.py.
    """

    is_synthetic = models.BooleanField(
        default=False,
        help_text="A simulated annotator: every judgement it makes is flagged synthetic.",
    )

    class Meta:
        permissions = [
            ("label_comparisons", "Can label comparisons"),
            ("download_datasets", "Can create and download preference datasets"),
            ("launch_runs", "Can launch and cancel training runs"),
            ("import_trajectories", "Can import trajectories"),
            ("manage_campaigns", "Can create and manage labeling campaigns"),
        ]

    @property
    def pseudonym(self) -> str:
        """A stable id that does not reveal who the annotator is (used in exports)."""
        return pseudonym_for(self.pk)


def pseudonym_salt() -> str:
    """A salt derived from SECRET_KEY (the key itself never leaves the process)."""
    return hmac.new(settings.SECRET_KEY.encode(), b"arbiter-pseudonym", hashlib.sha256).hexdigest()


def pseudonym_for(user_id: int) -> str:
    """`annotator-` + 12 hex digits of sha256(salt:id); PostgreSQL computes the same in SQL exports."""
    return "annotator-" + hashlib.sha256(f"{pseudonym_salt()}:{user_id}".encode()).hexdigest()[:12]
