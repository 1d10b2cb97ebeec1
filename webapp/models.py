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


class JobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Job(BaseModel):
    """The fields every job shares."""

    Status = JobStatus
    ACTIVE = (JobStatus.QUEUED, JobStatus.RUNNING)

    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life from its worker.")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="", help_text="Why the job failed, when it did.")

    class Meta:
        abstract = True

    @property
    def finished(self) -> bool:
        return self.status not in self.ACTIVE

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE


def job_status_condition(prefix: str = "") -> models.Q:
    """The check constraint every job table carries on its status."""
    return models.Q(**{f"{prefix}status__in": list(JobStatus.values)})


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

    # A new password (set, reset, or voided for a set-password link) revokes the user's API
    # tokens: whoever had the old password may have made them (docs/team.md).
    def set_password(self, raw_password):
        super().set_password(raw_password)
        self._password_changed = True

    def set_unusable_password(self):
        super().set_unusable_password()
        self._password_changed = True

    def save(self, *args, **kwargs):
        super().save(*args, **kwargs)
        if getattr(self, "_password_changed", False):
            self._password_changed = False
            ApiToken.objects.filter(user=self).delete()

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


class ApiToken(BaseModel):
    """A user's own API token, one of several (a script, a notebook, a CI job).

    Only the key's sha256 is stored: the key is shown once, when it is created. The prefix
    tells a user's tokens apart on their page.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64)
    prefix = models.CharField(max_length=8)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # Its index serves the lookup of every token-authenticated request.
            models.UniqueConstraint(fields=["key_hash"], name="apitoken_key_hash_unique"),
        ]
        indexes = [
            # A user's token page lists their tokens.
            models.Index(fields=["user", "created_at"], name="apitoken_user_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}...)"


class Run(Job):
    """One training job of any kind (rollout, behaviour cloning, reward model, PPO, ...).

    Its config is validated against the kind's dataclass before it is queued; the worker
    reports progress, metrics, logs, checkpoints and a heartbeat while it runs. Lineage
    (dataset snapshot -> reward model -> policy) is a list of links to the rows it read
    and wrote, filled in by the kind, so this core app imports no domain app.
    """

    kind = models.CharField(max_length=32, db_index=True)
    name = models.CharField(max_length=200, blank=True, default="")
    config = models.JSONField(
        default=dict, help_text="The kind's config dataclass, validated, with defaults filled in."
    )
    progress = models.FloatField(default=0.0)
    progress_message = models.CharField(max_length=300, blank=True, default="")
    log = models.TextField(blank=True, default="", help_text="The last lines the job logged.")
    summary = models.JSONField(default=dict, blank=True, help_text="Final figures of the run.")
    artifacts = models.JSONField(default=list, blank=True, help_text="[{name, path, bytes}] under the run's folder.")
    lineage = models.JSONField(
        default=list, blank=True, help_text="[{direction: input|output, type, id, label, url}] rows read and written."
    )
    checkpoint = models.JSONField(default=dict, blank=True, help_text="{step, path} of the last checkpoint.")
    device = models.CharField(max_length=200, blank=True, default="")
    worker = models.CharField(max_length=200, blank=True, default="")
    attempt = models.PositiveIntegerField(default=0, help_text="Goes up each time the run is queued (resume).")
    queue = models.CharField(
        max_length=50,
        blank=True,
        default="",
        help_text="The Celery queue it is sent to (empty: RUN_QUEUE); a run that loads no model goes to the housekeeping one.",
    )
    queued_at = models.DateTimeField(
        null=True, blank=True, db_index=True, help_text="When it was last queued: its place in the line for a worker."
    )
    cancel_requested = models.BooleanField(default=False)
    idempotency_key = models.CharField(
        max_length=64, blank=True, default="", help_text="A launch repeated with the same key makes no second run."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(condition=job_status_condition(), name="run_status_valid"),
            models.CheckConstraint(
                condition=models.Q(progress__gte=0) & models.Q(progress__lte=1), name="run_progress_range"
            ),
            models.UniqueConstraint(
                fields=["created_by", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="run_launch_once_per_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} run #{self.pk}"


class RunMetric(models.Model):
    """Metrics a run logged at one step (loss, accuracy, learning rate, ...)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metrics")
    step = models.PositiveIntegerField()
    values = models.JSONField()
    logged_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["run", "step"], name="runmetric_run_step")]


class WorkerBeat(models.Model):
    """A live Celery worker: which queues it takes, and when it last said so (webapp/workers.py)."""

    hostname = models.CharField(max_length=200, unique=True)
    queues = models.CharField(max_length=300, help_text="The queues it takes, comma-separated.")
    pid = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.hostname

    @property
    def queue_names(self) -> list[str]:
        return [q for q in self.queues.split(",") if q]
