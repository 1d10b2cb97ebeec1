"""The reward-model registry: trained models with their data, backbone, metrics and run."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotate.models import Campaign, Comparison, DatasetSnapshot, SnapshotJudgement
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
        snapshot = self.snapshot
        synthetic = {False}  # a snapshot holds people's judgements only unless it was asked for simulated ones
        if snapshot.filters.get("include_synthetic"):
            members = SnapshotJudgement.objects.filter(snapshot=snapshot)
            synthetic = set(members.values_list("judgement__synthetic", flat=True).distinct()) or synthetic
        return trained_on_words(self.config.get("feedback", "human"), snapshot.stats.get("sources", {}), synthetic)

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"


ANNOTATORS_WORDS = {
    frozenset({False}): "people's votes",
    frozenset({True}): "simulated annotators' votes",
    frozenset({False, True}): "people's and simulated annotators' votes",
}


def trained_on_words(feedback: str, sources: dict, synthetic: set[bool] = frozenset({False})) -> str:
    """Whose votes a reward model learned from, in words: its run's feedback choice against what
    its snapshot holds (an old model, from before judges, learned from people); `synthetic` is the
    set of the snapshot's judgements' synthetic flags (issue 53: simulated votes were called people's)."""
    human, ai = sources.get("human"), sources.get("ai", 0)
    annotators = ANNOTATORS_WORDS[frozenset(synthetic)]
    if feedback == "ai" or (feedback == "both" and human == 0 and ai):
        return "judges' votes (AI feedback)"
    if feedback == "both" and ai:
        return f"{annotators} and judges' votes"
    return annotators


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
