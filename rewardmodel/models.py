"""The reward-model registry: trained models with their data, backbone, metrics and run."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotate.models import Campaign, Comparison, DatasetSnapshot
from webapp.models import BaseModel


class RewardModel(BaseModel):
    """A trained reward model. Its row exists only once its files are complete on disk."""

    name = models.CharField(max_length=200)
    snapshot = models.ForeignKey(
        DatasetSnapshot,
        on_delete=models.PROTECT,
        related_name="reward_models",
        help_text="The frozen preference data it was trained on (train split).",
    )
    run = models.OneToOneField(
        "webapp.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="reward_model"
    )
    backbone = models.CharField(max_length=500)
    model_dir = models.CharField(max_length=500)
    config = models.JSONField(default=dict)
    metrics = models.JSONField(default=dict, help_text="Held-out evaluation (see rewardmodel/evaluate.py).")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    @property
    def trained_on(self) -> str:
        return trained_on_words(self.config.get("feedback", "human"), self.snapshot.stats.get("sources", {}))

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"


def trained_on_words(feedback: str, sources: dict) -> str:
    """Whose votes a reward model learned from, in words: its run's feedback choice against what
    its snapshot holds (an old model, from before judges, learned from people)."""
    human, ai = sources.get("human"), sources.get("ai", 0)
    if feedback == "ai" or (feedback == "both" and human == 0 and ai):
        return "judges' votes (AI feedback)"
    if feedback == "both" and ai:
        return "people's and judges' votes"
    return "people's votes"


class CampaignRewardModel(models.Model):
    """The reward model a campaign currently uses (for margins and uncertainty ordering)."""

    campaign = models.OneToOneField(Campaign, on_delete=models.CASCADE, related_name="current_reward_model")
    reward_model = models.ForeignKey(RewardModel, on_delete=models.CASCADE, related_name="campaigns")
    chosen_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    chosen_at = models.DateTimeField(auto_now=True)


class ComparisonScore(models.Model):
    """A reward model's scores of both trajectories of a comparison; margin = score A - score B."""

    reward_model = models.ForeignKey(RewardModel, on_delete=models.CASCADE, related_name="comparison_scores")
    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="reward_scores")
    score_a = models.FloatField()
    score_b = models.FloatField()
    margin = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["reward_model", "comparison"], name="comparisonscore_once")]
