"""Run kinds of the reward model: training (with evaluation and registration) and scoring a campaign."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from django.urls import reverse

from annotate.exports import iter_rows
from annotate.models import Campaign, DatasetSnapshot, Policy
from annotate.preferences import FEEDBACK as FEEDBACK_CHOICES
from annotate.preferences import FEEDBACK_WORDS, can_train_reward_model, fed_by, reward_model_pairs
from core.callbacks import Callbacks
from core.figures import share_text
from rewardmodel.backbones import BackboneError, backbone_check
from rewardmodel.models import CampaignRewardModel, RewardModel
from rewardmodel.scoring import RewardScorer
from rewardmodel.services import (
    ORDERS,
    campaign_order_by_uncertainty,
    comparisons_score,
    default_tokenizer_dir,
    evaluate_reward_model,
    reward_model_register,
    snapshot_problems,
)
from rewardmodel.train import RewardModelConfig, train_reward_ensemble
from webapp.runs.kinds import RunKind, register
from webapp.runs.lineage import lineage_link
from webapp.runs.selectors import policy_in_training
from webapp.runs.services import RunCancelled, run_add_artifact, run_add_lineage, run_dir


def _help(text: str) -> dict:
    return {"help": text}


@dataclass
class RewardModelRunConfig(RewardModelConfig):
    snapshot_id: int = field(
        default=0,
        metadata=_help("The dataset snapshot: its train split trains the model, its test split evaluates it."),
    )
    name: str = field(default="reward-model", metadata=_help("Name in the registry."))
    feedback: str = field(
        default="both",
        metadata=_help(
            "Which of the snapshot's pairs train and test it: human (people's votes), ai (judges' votes: AI "
            "feedback) or both (every pair the snapshot holds; a snapshot holds people's only unless asked)."
        ),
    )
    eval_policy_id: int = field(
        default=0,
        metadata=_help(
            "Also measure accuracy on pairs of this policy's own trajectories on held-out tasks, against the rubric "
            "(the policy the model will be used on; 0: none). Its tokenizer is shared when tokenizer dir is empty."
        ),
    )

    def training_config(self) -> RewardModelConfig:
        names = {f.name for f in fields(RewardModelConfig)}
        return RewardModelConfig(**{k: v for k, v in asdict(self).items() if k in names})

    def validate(self) -> list[str]:
        problems = []
        if not self.name.strip() or "/" in self.name or self.name.startswith("."):
            problems.append("name: a plain name (letters, digits, dashes).")
        if self.feedback not in FEEDBACK_CHOICES:
            problems.append(f"feedback: one of {', '.join(FEEDBACK_CHOICES)}.")
        if self.tokenizer_dir or self.backbone != "policy-llama":
            problems += super().validate()
        else:  # the tokenizer is filled in from a policy by the check below
            problems += [p for p in super().validate() if not p.startswith("tokenizer_dir")]
        return problems


def _snapshots():
    return list(DatasetSnapshot.objects.filter(status="succeeded").order_by("-created_at")[:200])


def _snapshot_choices():
    """Every ready snapshot, newest first; one too small to train a reward model says so."""
    return [
        (s.pk, str(s) if can_train_reward_model(reward_model_pairs(s.stats)) else f"{s} (too few pairs to train one)")
        for s in _snapshots()
    ]


def _trainable_snapshot() -> int | None:
    """The form's starting snapshot: the newest one big enough to train a reward model."""
    return next((s.pk for s in _snapshots() if can_train_reward_model(reward_model_pairs(s.stats))), None)


def _policy_choices():
    return [(0, "(none)")] + [
        (p.pk, str(p)) for p in Policy.objects.exclude(model_dir="").order_by("-created_at")[:200]
    ]


def _fill_tokenizer(config: RewardModelRunConfig) -> None:
    """policy-llama shares a policy's tokenizer: the one it will be used on (eval_policy_id), else the
    default policy, else the newest policy whose model is on disk (an admin's own policy, registered
    before or instead of training the default one)."""
    if config.backbone == "policy-llama" and not config.tokenizer_dir:
        config.tokenizer_dir = default_tokenizer_dir(config.eval_policy_id) or _newest_policy_dir()


def _newest_policy_dir() -> str:
    newest = Policy.objects.exclude(model_dir="").order_by("-created_at").values_list("model_dir", flat=True)
    for model_dir in newest[:50]:
        if (Path(model_dir) / "config.json").exists():
            return model_dir
    return ""


def _no_tokenizer_problem() -> str:
    """Why no tokenizer is there to share: the behaviour-cloning run to wait for, when one is under way."""
    training = policy_in_training()
    if training is not None:
        return (
            f"tokenizer_dir: the default policy, whose tokenizer policy-llama shares, is still training in run "
            f"#{training.pk} ({training.name}, {training.status}, {training.progress:.0%}); launch this once "
            f"it has succeeded, or give a policy directory, or pick the minilm backbone."
        )
    return (
        "tokenizer_dir: no policy to share a tokenizer with; train the default policy (a bc run, or manage.py "
        "train_policy) or give a policy directory."
    )


def _train_check(config: RewardModelRunConfig) -> list[str]:

    problems = snapshot_problems(config.snapshot_id, feedback=config.feedback)
    if config.eval_policy_id and not Policy.objects.filter(pk=config.eval_policy_id).exists():
        problems.append(f"No policy with id {config.eval_policy_id}.")
    _fill_tokenizer(config)
    if config.backbone == "policy-llama" and not config.tokenizer_dir:
        problems.append(_no_tokenizer_problem())
    else:
        try:
            backbone_check(config.training_config())
        except BackboneError as exc:
            problems.append(str(exc))
    return problems


def _train_lineage(config: RewardModelRunConfig) -> list[dict]:
    snapshot = DatasetSnapshot.objects.get(pk=config.snapshot_id)
    links = [lineage_link("dataset", snapshot.pk, snapshot, reverse("annotate:dataset", args=[snapshot.pk]))]
    if config.eval_policy_id:
        policy = Policy.objects.get(pk=config.eval_policy_id)
        links.append(lineage_link("policy", policy.pk, policy, reverse("training:policy", args=[policy.pk])))
    return links


def _train_execute(*, run, config: RewardModelRunConfig, reporter, compute, resume_from) -> dict:

    snapshot = DatasetSnapshot.objects.get(pk=config.snapshot_id)
    rows = [r for r in iter_rows(snapshot, "trl", split="train") if fed_by(r["source"], config.feedback)]
    # The `trl` rows hold no tie: the snapshot's tied pairs were left out before, and are counted here.
    ties = snapshot.stats.get("train_ties", 0)
    reporter.log(
        f"Training on {len(rows)} pairs of {snapshot} ({FEEDBACK_WORDS[config.feedback]}; {ties} tied pairs of its "
        f"train split left out) with backbone {config.backbone} on {compute.name}."
    )
    callbacks = Callbacks(
        progress=lambda f, m="": reporter.progress(0.85 * f, m or "training"),
        metrics=reporter.metrics,
        log=reporter.log,
        should_stop=reporter.should_stop,
        checkpoint=reporter.checkpoint,
    )
    work = run_dir(run) / "work"
    result = train_reward_ensemble(
        rows,
        config.training_config(),
        work,
        callbacks=callbacks,
        resume_from=resume_from,
        device=compute.device,
        bf16=compute.bf16,
    )
    if result.cancelled:
        raise RunCancelled()
    reporter.progress(0.87, "evaluating on the test split")
    scorer = RewardScorer(result.model_dir, device=compute.device)
    eval_policy = Policy.objects.filter(pk=config.eval_policy_id).first() if config.eval_policy_id else None
    metrics = evaluate_reward_model(
        scorer=scorer, snapshot=snapshot, eval_policy=eval_policy, seed=config.seed, feedback=config.feedback
    )
    metrics["train"] = {"pairs": result.train_pairs, "steps": result.steps, "seconds": result.seconds}
    reporter.metrics(result.steps, {"eval/accuracy": metrics["test"]["accuracy"], "eval/ece": metrics["test"]["ece"]})
    reward_model = reward_model_register(
        run=run,
        name=config.name,
        snapshot=snapshot,
        config=asdict(config),
        trained_dir=Path(result.model_dir),
        metrics=metrics,
        created_by=run.created_by,
    )
    run_add_lineage(
        run=run,
        links=[
            lineage_link(
                "reward model",
                reward_model.pk,
                reward_model,
                reverse("rewardmodel:detail", args=[reward_model.pk]),
            )
        ],
    )
    run_add_artifact(run=run, name="reward model", path=Path(reward_model.model_dir))
    test = metrics["test"]
    reporter.log(
        f"Held-out accuracy {test['accuracy']:.3f} on {test['n']} pairs; "
        f"human agreement {share_text(metrics['human_agreement']['pairwise_excluding_ties'])}."
    )
    return {
        "reward_model_id": reward_model.pk,
        "accuracy": test["accuracy"],
        "accuracy_ci": test["accuracy_ci"],
        "ece": test["ece"],
        "test_pairs": test["n"],
        "train_pairs": result.train_pairs,
        "feedback": config.feedback,
        "rubric_accuracy": (metrics["rubric"] or {}).get("accuracy"),
        "policy_pairs_accuracy": (metrics.get("policy_pairs") or {}).get("accuracy"),
    }


# --- Scoring a campaign --------------------------------------------------------------------


@dataclass
class ScoringRunConfig:
    campaign_id: int = field(default=0, metadata=_help("The campaign whose comparisons are scored."))
    reward_model_id: int = field(default=0, metadata=_help("The reward model (0: the campaign's current model)."))
    order: str = field(
        default="none",
        metadata=_help(
            "Afterwards order the queue: 'closest' (pairs the model finds closest first), 'disagree' (pairs whose "
            "votes so far go against the model first) or 'none' (leave the order)."
        ),
    )

    def validate(self) -> list[str]:

        return [] if self.order in ORDERS else [f"order: one of {', '.join(ORDERS)}."]


def _reward_model_of(config: ScoringRunConfig) -> RewardModel | None:
    if config.reward_model_id:
        return RewardModel.objects.filter(pk=config.reward_model_id).first()
    current = CampaignRewardModel.objects.filter(campaign_id=config.campaign_id).select_related("reward_model").first()
    return current.reward_model if current else None


def _scoring_check(config: ScoringRunConfig) -> list[str]:
    problems = []
    if not Campaign.objects.filter(pk=config.campaign_id).exists():
        problems.append(f"No campaign with id {config.campaign_id}.")
    elif _reward_model_of(config) is None:
        problems.append(
            f"No reward model with id {config.reward_model_id}."
            if config.reward_model_id
            else "The campaign has no current reward model; choose one"
            + ("." if RewardModel.objects.exists() else " (there is none yet: train one with a Reward model run).")
        )
    return problems


def _scoring_lineage(config: ScoringRunConfig) -> list[dict]:
    model = _reward_model_of(config)
    campaign = Campaign.objects.get(pk=config.campaign_id)
    return [
        lineage_link("reward model", model.pk, model, reverse("rewardmodel:detail", args=[model.pk])),
        lineage_link(
            "campaign", campaign.pk, campaign.name, reverse("rewardmodel:margins", args=[model.pk, campaign.pk])
        ),
    ]


def _scoring_execute(*, run, config: ScoringRunConfig, reporter, compute, resume_from) -> dict:

    model = _reward_model_of(config)
    campaign = Campaign.objects.get(pk=config.campaign_id)
    scorer = RewardScorer(model.model_dir, device=compute.device)

    def progress(fraction: float) -> None:
        reporter.progress(0.95 * fraction, "scoring comparisons")
        if reporter.should_stop():
            raise RunCancelled()

    scored = comparisons_score(reward_model=model, campaign=campaign, scorer=scorer, progress=progress)
    ordered = 0
    if config.order != "none":
        ordered = campaign_order_by_uncertainty(campaign=campaign, reward_model=model, order=config.order)
    reporter.log(f"Scored {scored} comparisons of {campaign.name}; reordered {ordered} open ones ({config.order}).")
    return {"scored": scored, "reordered": ordered, "order": config.order, "reward_model_id": model.pk}


def register_kinds() -> None:
    register(
        RunKind(
            name="reward_model",
            label="Reward model",
            config_class=RewardModelRunConfig,
            execute=_train_execute,
            description="Train a reward model with TRL's RewardTrainer on a dataset snapshot, evaluate it on the "
            "held-out split and register it.",
            check=_train_check,
            lineage=_train_lineage,
            resumable=True,
            choices={"snapshot_id": _snapshot_choices, "eval_policy_id": _policy_choices},
            work=lambda config: config.epochs * config.ensemble,
            work_words="epochs (times ensemble members)",
            suggest={"snapshot_id": _trainable_snapshot},
        )
    )
    register(
        RunKind(
            name="reward_scoring",
            label="Score a campaign",
            config_class=ScoringRunConfig,
            execute=_scoring_execute,
            description="Score every comparison of a campaign with a reward model (margins for admins), and "
            "optionally order its queue by the model's uncertainty.",
            check=_scoring_check,
            lineage=_scoring_lineage,
            choices={
                "campaign_id": lambda: [(c.pk, c.name) for c in Campaign.objects.order_by("-created_at")[:200]],
                "reward_model_id": lambda: (
                    [(0, "(the campaign's current model)")]
                    + [(m.pk, str(m)) for m in RewardModel.objects.order_by("-created_at")[:200]]
                ),
                "order": lambda: [
                    ("none", "none"),
                    ("closest", "closest first"),
                    ("disagree", "disagreeing with the votes first"),
                ],
            },
        )
    )
