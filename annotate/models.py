"""The annotation domain: what agents did and what people thought of it.

Rules that must hold are database constraints with names, so they hold whoever writes
the rows: one judgement per comparison and annotator, one assignment per comparison
and annotator, the two trajectories of a comparison differ (stored in id order) and
share the comparison's task (a composite foreign key on PostgreSQL, triggers on
SQLite: see migration 0002).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from core.markdown import markdown_html
from core.votes import side
from webapp.models import BaseModel, Job, job_status_condition


class Task(BaseModel):
    """A prompt for the agent. The reference answer is never shown to annotators."""

    class Split(models.TextChoices):
        TRAIN = "train"
        DEV = "dev"
        EVAL = "eval"

    external_id = models.CharField(max_length=200)
    prompt = models.TextField()
    environment = models.CharField(max_length=100, blank=True, default="")
    reference_answer = models.TextField(blank=True, default="")
    split = models.CharField(max_length=8, choices=Split.choices, default=Split.TRAIN)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            # A task belongs to its environment: two environments may each have a `cat-001`.
            models.UniqueConstraint(fields=["environment", "external_id"], name="task_environment_external_id_unique"),
            models.CheckConstraint(condition=Q(split__in=["train", "dev", "eval"]), name="task_split_valid"),
        ]
        indexes = [
            # Evaluation and dataset splits list the tasks of one split.
            models.Index(fields=["split"], name="task_split_idx"),
        ]

    def __str__(self) -> str:
        return self.external_id


class Policy(BaseModel):
    """An agent identity and version. Imported trajectories may have a policy with no model."""

    name = models.CharField(max_length=200)
    version = models.CharField(max_length=100, blank=True, default="")
    model_dir = models.CharField(max_length=500, blank=True, default="")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    metadata = models.JSONField(default=dict, blank=True)
    run = models.ForeignKey(
        "webapp.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="policies",
        help_text="The run that made this policy (none for imported or hand-registered ones).",
    )

    class Meta:
        verbose_name_plural = "policies"
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="policy_name_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.name}@{self.version}" if self.version else self.name


class Trajectory(BaseModel):
    """One episode of an agent on a task: ordered steps in canonical JSON (schema v1)."""

    class Source(models.TextChoices):
        GENERATED = "generated"
        IMPORTED = "imported"
        CORRECTED = "corrected"  # a person's correction of another trajectory (`Correction`)

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="trajectories")
    policy = models.ForeignKey(Policy, on_delete=models.PROTECT, related_name="trajectories")
    schema_version = models.CharField(max_length=50, default="arbiter.trajectory/v1")
    steps = models.JSONField()
    answer = models.TextField(blank=True, default="")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.IMPORTED)
    # Rubric outcome where known: correct, quote_support, steps, tool_errors, utility...
    outcome = models.JSONField(null=True, blank=True)
    content_hash = models.CharField(max_length=64)
    # sha256 of the steps and answer alone (not the agent or task): two rows with the same
    # behaviour_hash did the same thing, whatever agent name they were stored under.
    behaviour_hash = models.CharField(max_length=64, blank=True, default="")
    import_batch = models.ForeignKey(
        "ImportBatch",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="trajectories",
        help_text="The upload that first stored it.",
    )
    run = models.ForeignKey(
        "webapp.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The rollout run that first stored it.",
    )
    num_steps = models.PositiveIntegerField()
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    agent_tokens = models.PositiveIntegerField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name_plural = "trajectories"
        constraints = [
            models.UniqueConstraint(fields=["content_hash"], name="trajectory_content_hash_unique"),
            # Target of the comparison's composite foreign keys (same task on both sides).
            models.UniqueConstraint(fields=["id", "task"], name="trajectory_id_task_unique"),
            models.CheckConstraint(
                condition=Q(source__in=["generated", "imported", "corrected"]), name="trajectory_source_valid"
            ),
        ]
        indexes = [
            # Comparison building walks the trajectories of each task.
            models.Index(fields=["task", "policy"], name="trajectory_task_policy_idx"),
        ]

    def __str__(self) -> str:
        return f"trajectory {self.pk} on {self.task_id}"


class JudgeMode(models.TextChoices):
    """What an annotator sees of a judge's vote on the comparison in front of them."""

    BLIND = "blind", "Blind (never shown)"
    AFTER_SUBMIT = "after_submit", "Shown after they submit"
    PREFILLED = "prefilled", "Filled into the form"


class Campaign(BaseModel):
    """A labeling project: guidelines, votes per comparison, leases, gold rate, dimensions,
    who may label it, and the environment or split its tasks come from.

    Status: draft -> active <-> paused; active or paused -> closed (reopened to active);
    closed -> archived (back to closed). Only an active campaign hands out work; a lease
    taken before a pause or close can still be submitted (annotate/services/campaigns.py).
    """

    class Status(models.TextChoices):
        DRAFT = "draft"
        ACTIVE = "active"
        PAUSED = "paused"
        CLOSED = "closed"
        ARCHIVED = "archived"

    name = models.CharField(max_length=200)
    guidelines = models.TextField(blank=True, default="", help_text="Markdown, rendered safely.")
    guidelines_html = models.TextField(
        blank=True,
        default="",
        editable=False,
        help_text="The guidelines rendered (sanitized) when saved, not per page view.",
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.ACTIVE)
    votes_per_comparison = models.PositiveSmallIntegerField(default=3)
    lease_seconds = models.PositiveIntegerField(default=15 * 60)
    gold_rate = models.FloatField(default=0.0, help_text="Share of assignments that are gold.")
    dimensions = models.JSONField(
        default=list,
        blank=True,
        help_text='Rating dimensions: [{"name": "correctness", "scale": 5, "description": "..."}].',
    )
    rationale_required = models.BooleanField(default=False)
    deadline = models.DateTimeField(null=True, blank=True)
    pool_only = models.BooleanField(default=False, help_text="Only the annotators in the pool may label it.")
    pool = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="campaign_pools")
    environment = models.CharField(
        max_length=100, blank=True, default="", help_text="Fill only from tasks of this environment (blank: any)."
    )
    task_split = models.CharField(
        max_length=8, blank=True, default="", help_text="Fill only from tasks of this split (blank: any)."
    )
    cloned_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    judge_mode = models.CharField(
        max_length=12,
        choices=JudgeMode.choices,
        default=JudgeMode.BLIND,
        help_text="What annotators see of a judge's vote: nothing (blind), its verdict after they submit, "
        "or its verdict filled into the form (prefilled).",
    )
    shown_judge = models.ForeignKey(
        "Judge",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The judge whose vote is shown after submit or filled in (judge modes other than blind).",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name"], name="campaign_name_unique"),
            models.CheckConstraint(
                condition=Q(judge_mode__in=["blind", "after_submit", "prefilled"]), name="campaign_judge_mode_valid"
            ),
            models.CheckConstraint(condition=Q(votes_per_comparison__gte=1), name="campaign_votes_at_least_one"),
            models.CheckConstraint(condition=Q(lease_seconds__gte=1), name="campaign_lease_positive"),
            models.CheckConstraint(
                condition=Q(gold_rate__gte=0) & Q(gold_rate__lte=1), name="campaign_gold_rate_range"
            ),
            models.CheckConstraint(
                condition=Q(task_split__in=["", "train", "dev", "eval"]), name="campaign_task_split_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["draft", "active", "paused", "closed", "archived"]),
                name="campaign_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def from_db(cls, db, field_names, values):
        campaign = super().from_db(db, field_names, values)
        campaign._rendered_guidelines = campaign.__dict__.get("guidelines")
        return campaign

    def set_guidelines(self, text: str, html: str) -> None:
        """New guidelines with their HTML already rendered (the campaign service renders them once,
        timed, when it checks them): saving does not render them again."""
        self.guidelines, self.guidelines_html, self._rendered_guidelines = text, html, text

    def save(self, *args, **kwargs):
        # Rendered once when they change (every annotator's page shows them; a page view
        # never renders Markdown), whoever saves: the services, the clone, the Django admin.
        if self.guidelines != getattr(self, "_rendered_guidelines", None) or (
            self.guidelines and not self.guidelines_html
        ):
            self.guidelines_html = markdown_html(self.guidelines)
            self._rendered_guidelines = self.guidelines
            if kwargs.get("update_fields") is not None and "guidelines" in kwargs["update_fields"]:
                kwargs["update_fields"] = {*kwargs["update_fields"], "guidelines_html"}
        super().save(*args, **kwargs)


class Choice(models.IntegerChoices):
    """The 5-point scale in A/B terms (A is `trajectory_a`), as WebGPT and InstructGPT use."""

    A_MUCH_BETTER = 1, "A much better"
    A_BETTER = 2, "A better"
    TIE = 3, "Tie"
    B_BETTER = 4, "B better"
    B_MUCH_BETTER = 5, "B much better"


def choice_direction(choice: int) -> str:
    """'A', 'tie' or 'B': the side a 5-point choice prefers (`core.votes.side`)."""
    return side(choice)


class Comparison(BaseModel):
    """Two different trajectories of the same task, to be judged in a campaign."""

    class Status(models.TextChoices):
        OPEN = "open"
        COMPLETE = "complete"
        RETIRED = "retired"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="comparisons")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="comparisons")
    trajectory_a = models.ForeignKey(Trajectory, on_delete=models.PROTECT, related_name="+")
    trajectory_b = models.ForeignKey(Trajectory, on_delete=models.PROTECT, related_name="+")
    priority = models.FloatField(default=0.0, help_text="Higher is served first.")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.OPEN)
    # Kept by the assignment engine in the same transaction as the rows they count, so the
    # next-assignment query reads one row instead of counting: judgements stored, and
    # slots taken (judgements plus leases not yet expired by the sweep).
    votes = models.PositiveSmallIntegerField(default=0)
    slots_taken = models.PositiveSmallIntegerField(default=0)
    is_gold = models.BooleanField(default=False)
    gold_choice = models.PositiveSmallIntegerField(choices=Choice.choices, null=True, blank=True)
    # An admin's ruling where the votes disagree (the disagreements view).
    adjudicated_choice = models.PositiveSmallIntegerField(choices=Choice.choices, null=True, blank=True)
    adjudicated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    adjudicated_at = models.DateTimeField(null=True, blank=True)
    adjudication_note = models.TextField(blank=True, default="")

    class Meta:
        constraints = [
            # Stored in id order: the pair differs, and (a, b) and (b, a) are the same pair.
            models.CheckConstraint(condition=Q(trajectory_a__lt=F("trajectory_b")), name="comparison_pair_ordered"),
            models.UniqueConstraint(fields=["campaign", "trajectory_a", "trajectory_b"], name="comparison_pair_unique"),
            models.CheckConstraint(
                condition=Q(is_gold=False) | Q(gold_choice__isnull=False),
                name="comparison_gold_has_answer",
            ),
            models.CheckConstraint(
                condition=Q(gold_choice__isnull=True) | Q(gold_choice__gte=1, gold_choice__lte=5),
                name="comparison_gold_choice_range",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["open", "complete", "retired"]),
                name="comparison_status_valid",
            ),
            models.CheckConstraint(condition=Q(slots_taken__gte=F("votes")), name="comparison_slots_cover_votes"),
            models.CheckConstraint(
                condition=Q(adjudicated_choice__isnull=True) | Q(adjudicated_choice__gte=1, adjudicated_choice__lte=5),
                name="comparison_adjudicated_choice_range",
            ),
        ]
        indexes = [
            # The next-assignment query: open comparisons of a campaign by priority.
            models.Index(fields=["campaign", "status", "-priority", "id"], name="comparison_queue_idx"),
        ]

    def __str__(self) -> str:
        return f"comparison {self.pk} ({self.trajectory_a_id} vs {self.trajectory_b_id})"


class Assignment(BaseModel):
    """A comparison leased to one annotator, with the side shown on the left chosen at random."""

    class Status(models.TextChoices):
        LEASED = "leased"
        SUBMITTED = "submitted"
        SKIPPED = "skipped"
        EXPIRED = "expired"

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments")
    left_is_a = models.BooleanField(help_text="True when trajectory A is shown on the left.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.LEASED)
    leased_until = models.DateTimeField()
    shown_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    skip_reason = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["comparison", "annotator"], name="assignment_once_per_annotator"),
            models.CheckConstraint(
                condition=Q(status__in=["leased", "submitted", "skipped", "expired"]),
                name="assignment_status_valid",
            ),
        ]
        indexes = [
            # Counting live leases per comparison, and expiring stale ones.
            models.Index(fields=["comparison", "status"], name="assignment_comparison_idx"),
            # An annotator's current lease and history.
            models.Index(fields=["annotator", "status"], name="assignment_annotator_idx"),
            # The lease sweep: leases whose time ran out.
            models.Index(fields=["leased_until"], name="assignment_lease_expiry_idx", condition=Q(status="leased")),
        ]


class Judgement(BaseModel):
    """One annotator's verdict on one comparison, stored in A/B terms."""

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="judgements")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judgements")
    assignment = models.OneToOneField(
        Assignment, null=True, blank=True, on_delete=models.SET_NULL, related_name="judgement"
    )
    choice = models.PositiveSmallIntegerField(choices=Choice.choices)
    both_bad = models.BooleanField(default=False)
    ratings = models.JSONField(default=dict, blank=True, help_text="Per-dimension ratings.")
    first_wrong_step_a = models.PositiveIntegerField(null=True, blank=True)
    first_wrong_step_b = models.PositiveIntegerField(null=True, blank=True)
    rationale = models.TextField(blank=True, default="")
    seconds = models.FloatField(default=0.0)
    synthetic = models.BooleanField(default=False)
    judge_suggestion = models.PositiveSmallIntegerField(
        choices=Choice.choices,
        null=True,
        blank=True,
        help_text="The judge's verdict (A/B terms) that was filled into the form (prefilled mode), so anchoring "
        "can be measured; null when nothing was filled in.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["comparison", "annotator"], name="judgement_once_per_annotator"),
            models.CheckConstraint(condition=Q(choice__gte=1, choice__lte=5), name="judgement_choice_range"),
            models.CheckConstraint(condition=Q(seconds__gte=0), name="judgement_seconds_nonnegative"),
        ]
        indexes = [
            # Agreement and dataset snapshots read the judgements of a campaign's comparisons.
            models.Index(fields=["comparison", "synthetic"], name="judgement_comparison_idx"),
        ]


class ImportBatch(Job):
    """One trajectory import (upload, API call or command) and what came of it (a job: webapp/jobs.py)."""

    class Format(models.TextChoices):
        AUTO = "auto", "Detect"
        CANONICAL = "canonical", "Canonical v1"
        OPENAI = "openai", "OpenAI chat"
        ANTHROPIC = "anthropic", "Anthropic Messages"
        OTEL = "otel", "OpenTelemetry GenAI spans"
        OPENINFERENCE = "openinference", "OpenInference spans"
        LANGSMITH = "langsmith", "LangSmith runs"
        LANGFUSE = "langfuse", "Langfuse traces"

    filename = models.CharField(max_length=300)
    stored_path = models.CharField(max_length=500, blank=True, default="")
    partial_traces = models.BooleanField(
        default=False, help_text="Import traces whose records name a parent missing from the file (marked partial)."
    )
    dropped = models.JSONField(
        default=dict, blank=True, help_text="What the import left out on purpose, by kind: {kind: count}."
    )
    layout = models.CharField(
        max_length=10,
        default="jsonl",
        blank=True,
        help_text="jsonl (a record per line) or document (one JSON document).",
    )
    size_bytes = models.PositiveBigIntegerField(default=0)
    campaign = models.ForeignKey(Campaign, null=True, blank=True, on_delete=models.SET_NULL, related_name="imports")
    lines_read = models.PositiveIntegerField(default=0)
    created_count = models.PositiveIntegerField(default=0)
    duplicate_count = models.PositiveIntegerField(default=0)
    comparisons_created = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True, help_text="[{line, error}], capped.")
    message = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    format = models.CharField(
        max_length=20,
        choices=Format.choices,
        default=Format.AUTO,
        help_text="How the file is read; auto detects it from the content (docs/formats/README.md).",
    )

    class Meta:
        verbose_name_plural = "import batches"
        constraints = [
            models.CheckConstraint(condition=job_status_condition(), name="importbatch_status_valid"),
        ]
        indexes = [
            # Finding imports whose worker stopped heartbeating.
            models.Index(fields=["status", "heartbeat_at"], name="importbatch_status_idx"),
        ]


class DatasetSnapshot(Job):
    """A frozen, versioned selection of judgements, aggregated into preference pairs.

    Membership is stored (`SnapshotPair`, `SnapshotJudgement`, both protecting the rows
    they point at), so a snapshot never changes once it is ready, whatever happens to
    its campaigns later.
    """

    class Aggregation(models.TextChoices):
        MAJORITY = "majority", "Majority of the votes"
        MEAN = "mean", "Mean of the 5-point scale"

    class Ties(models.TextChoices):
        KEEP = "keep", "Keep (margin 0)"
        DROP = "drop", "Drop"

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    campaigns = models.ManyToManyField(Campaign, related_name="snapshots")
    filters = models.JSONField(default=dict, help_text="min_votes, min_agreement, include_synthetic, date range.")
    aggregation = models.CharField(max_length=10, choices=Aggregation.choices, default=Aggregation.MAJORITY)
    ties = models.CharField(max_length=4, choices=Ties.choices, default=Ties.KEEP)
    seed = models.PositiveIntegerField(default=0)
    test_fraction = models.FloatField(default=0.2)
    progress = models.FloatField(default=0.0)
    message = models.TextField(blank=True, default="")
    content_hash = models.CharField(max_length=64, blank=True, default="")
    stats = models.JSONField(default=dict, blank=True, help_text="Counts, split sizes, agreement.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(condition=job_status_condition(), name="snapshot_status_valid"),
            models.CheckConstraint(
                condition=Q(test_fraction__gte=0) & Q(test_fraction__lt=1), name="snapshot_test_fraction_range"
            ),
            models.CheckConstraint(
                condition=Q(status="succeeded") | Q(content_hash=""), name="snapshot_hash_only_when_ready"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"


class SnapshotPair(models.Model):
    """One comparison in a snapshot: its aggregated preference and its split."""

    class Preferred(models.TextChoices):
        A = "A"
        B = "B"
        TIE = "tie"

    snapshot = models.ForeignKey(DatasetSnapshot, on_delete=models.CASCADE, related_name="pairs")
    comparison = models.ForeignKey(Comparison, on_delete=models.PROTECT, related_name="+")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    split = models.CharField(max_length=5)
    preferred = models.CharField(max_length=3, choices=Preferred.choices)
    margin = models.FloatField()
    votes = models.PositiveIntegerField()
    agreement = models.FloatField(help_text="Share of votes on the winning side (A, B or tie).")
    source = models.CharField(
        max_length=5,
        default="human",
        help_text="Whose votes made the preference: human (people, simulated annotators when the snapshot "
        "includes them) or ai (judges: AI feedback).",
    )

    class Meta:
        constraints = [
            # Its index also serves the exports, which stream a snapshot's pairs in comparison order.
            models.UniqueConstraint(fields=["snapshot", "comparison"], name="snapshotpair_once"),
            models.CheckConstraint(condition=Q(source__in=["human", "ai"]), name="snapshotpair_source_valid"),
            models.CheckConstraint(condition=Q(split__in=["train", "test"]), name="snapshotpair_split_valid"),
            models.CheckConstraint(condition=Q(margin__gte=0), name="snapshotpair_margin_nonnegative"),
        ]


class SnapshotJudgement(models.Model):
    """A judgement frozen into a snapshot (the `raw` and `steps` exports read these), with what
    the `raw` export says of it from other tables frozen beside it (its task's id and the side
    shown on the left), so the export reads two tables, not five."""

    snapshot = models.ForeignKey(DatasetSnapshot, on_delete=models.CASCADE, related_name="+")
    judgement = models.ForeignKey(Judgement, on_delete=models.PROTECT, related_name="+")
    split = models.CharField(max_length=5)
    task_external_id = models.CharField(max_length=200, default="", help_text="The comparison's task, by its id.")
    left_is_a = models.BooleanField(
        null=True, blank=True, help_text="Trajectory A was shown on the left (null: no assignment recorded)."
    )

    class Meta:
        constraints = [
            # Its index also serves the raw export: a snapshot's judgements in id order.
            models.UniqueConstraint(fields=["snapshot", "judgement"], name="snapshotjudgement_once"),
            models.CheckConstraint(condition=Q(split__in=["train", "test"]), name="snapshotjudgement_split_valid"),
        ]


class CampaignFill(Job):
    """Comparisons built in a campaign from stored trajectories (a job when large).

    `selection` names the trajectories (import batches, policies, rollout runs, task split,
    tags), `strategy` how they are paired; the counts say what came of it.
    """

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="fills")
    selection = models.JSONField(default=dict, blank=True)
    strategy = models.CharField(max_length=40)
    options = models.JSONField(default=dict, blank=True, help_text="max_per_task, seed, policy_a, policy_b, ...")
    progress = models.FloatField(default=0.0)
    trajectories = models.PositiveIntegerField(default=0, help_text="Trajectories selected.")
    created_count = models.PositiveIntegerField(default=0, help_text="Comparisons created.")
    existing_count = models.PositiveIntegerField(default=0, help_text="Pairs already in the campaign.")
    identical_count = models.PositiveIntegerField(default=0, help_text="Pairs refused: the same steps and answer.")
    message = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(condition=job_status_condition(), name="campaignfill_status_valid"),
        ]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"], name="campaignfill_status_idx"),
        ]

    def __str__(self) -> str:
        return f"fill #{self.pk} of {self.campaign_id}"


class Judge(BaseModel):
    """Anything that votes on a comparison beside people (docs/judges.md).

    - `reward_model`: a reward model trained here (`config.reward_model_id`): it scores both sides;
    - `rubric`: the environment's rubric, where the task's answer is known (the stored outcomes);
    - `chat`: a chat model behind an OpenAI-compatible endpoint (`config`: base_url, model,
      temperature, timeout, concurrency, rate limit, prices and cost cap), answering with
      structured output. Its key comes from an environment variable named in `config` or
      is stored here encrypted (`secret`), and is never shown back.

    A judge's votes are `JudgeVote` rows, never `Judgement`s: they count toward a comparison's
    k votes only where the admin said so when running the judge.
    """

    class Kind(models.TextChoices):
        REWARD_MODEL = "reward_model", "Reward model"
        RUBRIC = "rubric", "Environment rubric"
        CHAT = "chat", "Chat model (OpenAI-compatible)"

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    description = models.TextField(blank=True, default="")
    config = models.JSONField(default=dict, blank=True, help_text="What this kind needs (never a key).")
    secret = models.TextField(blank=True, default="", editable=False, help_text="A stored API key, encrypted.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name"], name="judge_name_unique"),
            models.CheckConstraint(condition=Q(kind__in=["reward_model", "rubric", "chat"]), name="judge_kind_valid"),
        ]

    def __str__(self) -> str:
        return self.name


class JudgeVote(models.Model):
    """A judge's answer on one comparison, in A/B terms whatever order it was asked in.

    `probe` says how it was asked: `first` (A shown first: the vote), `swapped` (B shown first:
    position bias) or `repeat` (asked again as the first time: self-consistency). Only `first`
    votes are the judge's votes; the probes measure it.
    """

    class Probe(models.TextChoices):
        FIRST = "first"
        SWAPPED = "swapped"
        REPEAT = "repeat"

    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="votes")
    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="judge_votes")
    run = models.ForeignKey("webapp.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    probe = models.CharField(max_length=8, choices=Probe.choices, default=Probe.FIRST)
    choice = models.PositiveSmallIntegerField(choices=Choice.choices)
    both_bad = models.BooleanField(default=False)
    ratings = models.JSONField(default=dict, blank=True, help_text='{dimension: {"A": n, "B": n}}')
    first_wrong_step_a = models.PositiveIntegerField(null=True, blank=True)
    first_wrong_step_b = models.PositiveIntegerField(null=True, blank=True)
    rationale = models.TextField(blank=True, default="")
    probability_a = models.FloatField(null=True, blank=True, help_text="A reward model's P(A is better).")
    counted = models.BooleanField(default=False, help_text="Counted toward the comparison's k votes.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["judge", "comparison", "probe"], name="judgevote_once_per_probe"),
            models.CheckConstraint(condition=Q(choice__gte=1, choice__lte=5), name="judgevote_choice_range"),
            models.CheckConstraint(condition=Q(probe__in=["first", "swapped", "repeat"]), name="judgevote_probe_valid"),
            models.CheckConstraint(
                condition=Q(probability_a__isnull=True) | Q(probability_a__gte=0, probability_a__lte=1),
                name="judgevote_probability_range",
            ),
            models.CheckConstraint(condition=Q(counted=False) | Q(probe="first"), name="judgevote_counted_first"),
        ]
        indexes = [
            # The workbench, the routing and the agreement panel read the votes of a campaign's comparisons.
            models.Index(fields=["comparison", "judge"], name="judgevote_comparison_idx"),
        ]


class JudgeCall(models.Model):
    """One request to a chat judge and what came back, kept for audit (never the key)."""

    class Status(models.TextChoices):
        OK = "ok"
        INVALID = "invalid", "Answered, but not a verdict"
        ERROR = "error"

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="calls")
    run = models.ForeignKey("webapp.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    comparison = models.ForeignKey(Comparison, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    probe = models.CharField(max_length=8, default="first")
    attempt = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=8, choices=Status.choices)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    structured_output = models.CharField(max_length=12, blank=True, default="")
    request = models.JSONField(default=dict, help_text="The body sent (messages, model, settings).")
    response = models.TextField(blank=True, default="", help_text="What the server answered, as it answered.")
    latency_s = models.FloatField(default=0.0)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(status__in=["ok", "invalid", "error"]), name="judgecall_status_valid"),
        ]
        indexes = [
            # The audit list of a run, and a run's spending (resume reads it).
            models.Index(fields=["run", "id"], name="judgecall_run_idx"),
        ]


class Correction(BaseModel):
    """A person's fix of one side of a comparison: a new trajectory with its lineage.

    `kind` answer: the final answer edited. `kind` tool_call: from `step` (an action of the
    original) on, calls the person chose, each checked against its tool's JSON Schema, then an
    answer. Where the task's environment is known the calls were executed in it and the real
    observations recorded (`replayed`), and the rubric scored the result (the corrected
    trajectory's outcome); otherwise it is stored as edited. Reviewed (accepted or rejected)
    before it goes into a dataset (docs/corrections.md).
    """

    class Kind(models.TextChoices):
        ANSWER = "answer"
        TOOL_CALL = "tool_call"

    class Status(models.TextChoices):
        PENDING = "pending"
        ACCEPTED = "accepted"
        REJECTED = "rejected"

    original = models.ForeignKey(Trajectory, on_delete=models.PROTECT, related_name="corrections")
    # Two people who make the same fix make one trajectory (its content hash is unique): a foreign key.
    corrected = models.ForeignKey(Trajectory, on_delete=models.PROTECT, related_name="correction_of")
    comparison = models.ForeignKey(
        Comparison, null=True, blank=True, on_delete=models.SET_NULL, related_name="corrections"
    )
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="corrections")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    step = models.PositiveIntegerField(help_text="The original's step where the correction starts.")
    replayed = models.BooleanField(
        default=False, help_text="Executed in the task's environment (real observations, rubric outcome)."
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True, default="")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=["answer", "tool_call"]), name="correction_kind_valid"),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "accepted", "rejected"]), name="correction_status_valid"
            ),
            models.CheckConstraint(condition=~Q(original=F("corrected")), name="correction_is_another_trajectory"),
        ]
        indexes = [
            # The review queue and the exports: corrections by status, oldest first.
            models.Index(fields=["status", "id"], name="correction_status_idx"),
        ]


class CorrectionReplay(Job):
    """A correction played in its task's environment, a job on a worker (the web process never
    starts an environment): the steps before the correction again, then the person's calls with
    their real observations, then the rubric. Until it has run, the correction is stored as
    edited; a replay that cannot be made (the environment answers otherwise now, or is not
    available on the worker) leaves it so, with `note` saying why."""

    correction = models.OneToOneField(Correction, on_delete=models.CASCADE, related_name="replay")
    note = models.TextField(blank=True, default="", help_text="Why it stays as edited, when it does.")

    class Meta:
        constraints = [models.CheckConstraint(condition=job_status_condition(), name="correctionreplay_status_valid")]


class EnvironmentTools(BaseModel):
    """The tools an environment offers (OpenAI's form), as a worker found them when it built the
    environment. The web process never starts an environment (it may hold none of a worker's
    servers): the labeling screen and the correction checks read the tools here."""

    name = models.CharField(max_length=100, unique=True)
    tools = models.JSONField(null=True, blank=True, help_text="None: not known (see error).")
    error = models.TextField(blank=True, default="", help_text="Why the worker could not build it, when it could not.")
    described_at = models.DateTimeField(null=True, blank=True)


class SnapshotCorrection(models.Model):
    """An accepted correction frozen into a snapshot (the `sft` and `dpo` exports read these),
    split by its task as the snapshot's pairs are."""

    snapshot = models.ForeignKey(DatasetSnapshot, on_delete=models.CASCADE, related_name="+")
    correction = models.ForeignKey(Correction, on_delete=models.PROTECT, related_name="+")
    split = models.CharField(max_length=5)

    class Meta:
        constraints = [
            # Its index also serves the exports: a snapshot's corrections in id order.
            models.UniqueConstraint(fields=["snapshot", "correction"], name="snapshotcorrection_once"),
            models.CheckConstraint(condition=Q(split__in=["train", "test"]), name="snapshotcorrection_split_valid"),
        ]


class JudgementDraft(BaseModel):
    """A judgement in progress on a leased assignment, as the labeling screen's verdict form holds
    it, kept on the server (as Label Studio and Argilla keep drafts) so another tab, another
    device or a cleared browser brings it back. Removed when its assignment is submitted,
    skipped or expired (annotate/services/assignments.py)."""

    assignment = models.OneToOneField(Assignment, on_delete=models.CASCADE, related_name="draft")
    fields = models.JSONField(
        default=dict, blank=True, help_text="The verdict form's fields by name, each as the text the form holds."
    )


class JudgementRevision(BaseModel):
    """One change an annotator made to their own submitted judgement, while no dataset snapshot
    held it: the verdict before and after (A/B terms, the judgement's columns); `created_at` is
    when."""

    judgement = models.ForeignKey(Judgement, on_delete=models.CASCADE, related_name="revisions")
    before = models.JSONField(help_text="The judgement's verdict columns before the change.")
    after = models.JSONField(help_text="The judgement's verdict columns after the change.")

    class Meta:
        indexes = [
            # A judgement's history, in the order it changed (the API and the revise page list it).
            models.Index(fields=["judgement", "created_at"], name="judgementrevision_history_idx"),
        ]
