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
        digest = hmac.new(
            settings.SECRET_KEY.encode(), f"user:{self.pk}".encode(), hashlib.sha256
        ).hexdigest()
        return f"annotator-{digest[:12]}"
