"""Before/after evaluations: several systems (a policy, best-of-n over a policy) played on the
same held-out tasks, their rubric and reward-model figures with intervals, the episodes
behind them, and the blind human evaluations built from them."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotate.models import Campaign, Comparison, Policy, Task, Trajectory
from webapp.models import BaseModel


class Evaluation(BaseModel):
    """One evaluation: systems scored on the same tasks (the before/after dashboard's page)."""

    name = models.CharField(max_length=200)
    run = models.OneToOneField(
        "webapp.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="evaluation"
    )
    split = models.CharField(max_length=8, default="eval")
    reference_policy = models.ForeignKey(
        Policy,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="KL is measured against this policy (the starting policy).",
    )
    reward_model = models.ForeignKey(
        "rewardmodel.RewardModel",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="evaluations",
        help_text="Scores episodes and picks best-of-n.",
    )
    config = models.JSONField(default=dict, help_text="Tasks, samples per task, temperatures, seed.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"


class EvaluationEntry(BaseModel):
    """One system of an evaluation with its figures: {"sampled"|"greedy": {metric: {mean, low, high}}}."""

    class Kind(models.TextChoices):
        POLICY = "policy"
        BEST_OF_N = "best_of_n"

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="entries")
    label = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.POLICY)
    policy = models.ForeignKey(Policy, on_delete=models.PROTECT, related_name="evaluation_entries")
    n = models.PositiveIntegerField(
        default=1, help_text="Samples per task that best-of-n chooses from (1: the policy)."
    )
    is_baseline = models.BooleanField(default=False, help_text="The starting policy the others are read against.")
    position = models.PositiveIntegerField(default=0)
    metrics = models.JSONField(default=dict)

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["evaluation", "label"], name="evaluationentry_label_once"),
            models.CheckConstraint(condition=models.Q(n__gte=1), name="evaluationentry_n_positive"),
        ]

    def __str__(self) -> str:
        return self.label


class EvaluationEpisode(models.Model):
    """One episode an entry was scored on (for best-of-n, the chosen one), stored as a trajectory."""

    class Mode(models.TextChoices):
        SAMPLED = "sampled"
        GREEDY = "greedy"

    entry = models.ForeignKey(EvaluationEntry, on_delete=models.CASCADE, related_name="episodes")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    trajectory = models.ForeignKey(Trajectory, on_delete=models.PROTECT, related_name="+")
    mode = models.CharField(max_length=8, choices=Mode.choices)
    sample = models.PositiveIntegerField(default=0)
    correct = models.BooleanField()
    rm_score = models.FloatField(null=True, blank=True)
    kl = models.FloatField(null=True, blank=True, help_text="log pi - log pi_ref summed over the agent's tokens.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["entry", "task", "mode", "sample"], name="evaluationepisode_once")
        ]
        # The side-by-side view: one entry's episodes of one mode, by task.
        indexes = [models.Index(fields=["entry", "mode", "task"], name="evalepisode_entry_mode_task")]


class HumanEvaluation(BaseModel):
    """A blind campaign comparing a candidate's episodes with the baseline's, task by task."""

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="human_evaluations")
    campaign = models.OneToOneField(Campaign, on_delete=models.CASCADE, related_name="human_evaluation")
    baseline = models.ForeignKey(
        EvaluationEntry, on_delete=models.CASCADE, related_name="+", help_text="Trajectory A of every comparison."
    )
    candidate = models.ForeignKey(
        EvaluationEntry, on_delete=models.CASCADE, related_name="+", help_text="Trajectory B of every comparison."
    )
    mode = models.CharField(max_length=8, choices=EvaluationEpisode.Mode.choices)
    identical_pairs = models.PositiveIntegerField(default=0, help_text="Tasks left out: both sides did the same.")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~models.Q(baseline=models.F("candidate")), name="humaneval_two_systems")
        ]


class LoopRound(BaseModel):
    """One round of an iterated loop: roll out the round's starting policy, label its
    comparisons, retrain the reward model on every label of the loop so far, RL from the
    starting policy (KL to round one's start), evaluate, and open the audit of what the new
    reward model scores highest. `run_pipeline` makes round one; "next round" makes the rest.
    The loop's settings (a PipelineConfig) are copied from round to round."""

    class Stage(models.TextChoices):
        COLLECTING = "collecting"  # rolling out and building the round's comparisons
        LABELLING = "labelling"  # waiting for people to label the round's campaign
        TRAINING = "training"  # reward model, audit, RL and evaluation
        DONE = "done"

    loop = models.CharField(max_length=150, help_text="The loop's name (the pipeline's --name).")
    number = models.PositiveIntegerField()
    stage = models.CharField(max_length=10, choices=Stage.choices, default=Stage.COLLECTING)
    labels = models.CharField(
        max_length=10,
        default="simulated",
        help_text="'simulated' (annotators by the rubric) or 'people' (the round waits).",
    )
    config = models.JSONField(default=dict, help_text="The loop's settings (training.pipeline.PipelineConfig).")
    start_policy = models.ForeignKey(
        Policy, on_delete=models.PROTECT, related_name="+", help_text="The policy this round rolls out and improves."
    )
    reference_policy = models.ForeignKey(
        Policy,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Round one's start: the KL reference of every round.",
    )
    campaign = models.OneToOneField(
        Campaign,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Comparisons of the start policy's samples on training tasks.",
    )
    reward_model = models.ForeignKey(
        "rewardmodel.RewardModel",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Trained on every label of the loop so far.",
    )
    rl_run = models.ForeignKey("webapp.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    sft_run = models.ForeignKey(
        "webapp.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="With compare_dpo: SFT from the round's start on the accepted corrections of the round's dataset.",
    )
    dpo_run = models.ForeignKey(
        "webapp.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="With compare_dpo: DPO from the round's start on the round's dataset (corrections and pairs).",
    )
    expert_iteration_run = models.ForeignKey(
        "webapp.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Expert iteration from the round's start with the round's reward model, beside RL.",
    )
    policy = models.ForeignKey(
        Policy,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The round's result: of its methods' kept checkpoints, the one that gains most on dev.",
    )
    choice = models.JSONField(
        default=dict,
        blank=True,
        help_text="Why the round's result is what it is: each method's kept checkpoint and its dev figures.",
    )
    evaluation = models.OneToOneField(
        Evaluation, null=True, blank=True, on_delete=models.SET_NULL, related_name="loop_round"
    )
    audit_campaign = models.OneToOneField(
        Campaign, null=True, blank=True, on_delete=models.SET_NULL, related_name="audited_round"
    )
    seconds = models.JSONField(default=dict, blank=True, help_text="Wall seconds per stage.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["loop", "number"]
        constraints = [
            models.UniqueConstraint(fields=["loop", "number"], name="loopround_once"),
            models.CheckConstraint(condition=models.Q(number__gte=1), name="loopround_number_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.loop} round {self.number}"


class AuditItem(models.Model):
    """One comparison of a round's blind audit: an episode the reward model scored highest
    against the start's episode of the same task ("top"), or a labelled pair where the reward
    model most disagrees with the people's majority ("disagreement"). `favourite` is the side
    the reward model prefers; annotators are never told which side that is."""

    class Kind(models.TextChoices):
        TOP = "top"
        DISAGREEMENT = "disagreement"

    round = models.ForeignKey(LoopRound, on_delete=models.CASCADE, related_name="audit_items")
    comparison = models.OneToOneField(Comparison, on_delete=models.CASCADE, related_name="audit_item")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    favourite = models.ForeignKey(Trajectory, on_delete=models.PROTECT, related_name="+")
    favourite_score = models.FloatField()
    other_score = models.FloatField()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(kind__in=["top", "disagreement"]), name="audititem_kind_valid")
        ]
