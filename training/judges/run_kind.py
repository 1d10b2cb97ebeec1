"""The "judge" run kind: a judge votes on a campaign's comparisons (training/judges/services.py).

Progress counts answers; a cancel stops after the answers in flight are stored; a resume (or
a second run) asks only what the judge has not answered yet. A chat judge that reaches its
cost cap fails with the reason, keeping every vote paid for: raise the cap and resume. One
whose endpoint fails (max_failures_in_a_row calls in a row without a reply, or a 401, 403 or
404) fails at once with the reason in one line, at the progress it reached.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from django.urls import reverse

from annotate.models import Campaign, Comparison, Judge
from rewardmodel.models import RewardModel
from training.judges.services import RunOptions, judge_api_key, judge_run_execute
from webapp.errors import ArbiterError
from webapp.runs.kinds import RunKind, register
from webapp.runs.lineage import lineage_link
from webapp.runs.services import RunCancelled


def _help(text: str) -> dict:
    return {"help": text}


@dataclass
class JudgeRunConfig:
    judge_id: int = field(default=0, metadata=_help("The judge that votes."))
    campaign_id: int = field(default=0, metadata=_help("The campaign whose comparisons it votes on."))
    swapped_share: float = field(
        default=0.2,
        metadata=_help("Share of comparisons also asked with the sides swapped (measures position bias)."),
    )
    repeat_share: float = field(
        default=0.2, metadata=_help("Share of comparisons asked a second time (measures self-consistency).")
    )
    count_toward_votes: bool = field(
        default=False,
        metadata=_help(
            "Count the judge's votes toward each comparison's k votes (fewer people needed). Off: the judge's votes "
            "are beside people's, never instead of them."
        ),
    )
    include_complete: bool = field(
        default=True,
        metadata=_help("Also vote on comparisons people have finished (the agreement figures need them)."),
    )
    max_comparisons: int = field(default=0, metadata=_help("At most this many comparisons, in id order (0: all)."))
    then_order: bool = field(default=False, metadata=_help("When done, order the campaign's queue disagreement-first."))
    seed: int = field(default=0, metadata=_help("Which comparisons get the probes (the same on a resume)."))

    def validate(self) -> list[str]:
        problems = []
        for name in ("swapped_share", "repeat_share"):
            if not 0 <= getattr(self, name) <= 1:
                problems.append(f"{name}: a share between 0 and 1.")
        if self.max_comparisons < 0:
            problems.append("max_comparisons: 0 (all) or more.")
        if self.seed < 0:
            problems.append("seed: 0 or more.")
        return problems

    def options(self) -> RunOptions:
        names = set(RunOptions.__dataclass_fields__)
        return RunOptions(**{k: v for k, v in asdict(self).items() if k in names})


def _check(config: JudgeRunConfig) -> list[str]:
    problems = []
    judge = Judge.objects.filter(pk=config.judge_id).first()
    campaign = Campaign.objects.filter(pk=config.campaign_id).first()
    if judge is None:
        problems.append(f"No judge with id {config.judge_id}.")
    if campaign is None:
        problems.append(f"No campaign with id {config.campaign_id}.")
    elif not Comparison.objects.filter(campaign=campaign, is_gold=False).exists():
        problems.append(f"{campaign.name} has no comparison for a judge yet (gold ones are left out); fill it first.")
    if judge is not None and judge.kind == Judge.Kind.REWARD_MODEL:
        if not RewardModel.objects.filter(pk=judge.config.get("reward_model_id")).exists():
            problems.append(f"Judge {judge.name}'s reward model is gone.")
    if judge is not None and judge.kind == Judge.Kind.CHAT and judge.secret:
        try:
            judge_api_key(judge)
        except ArbiterError as exc:
            problems.append(exc.message)
    return problems


def _lineage(config: JudgeRunConfig) -> list[dict]:
    judge = Judge.objects.get(pk=config.judge_id)
    campaign = Campaign.objects.get(pk=config.campaign_id)
    return [
        lineage_link("judge", judge.pk, judge.name, reverse("training:judge", args=[judge.pk])),
        lineage_link("campaign", campaign.pk, campaign.name, reverse("annotate:quality", args=[campaign.pk])),
    ]


def _execute(*, run, config: JudgeRunConfig, reporter, compute, resume_from) -> dict:

    judge = Judge.objects.get(pk=config.judge_id)
    campaign = Campaign.objects.get(pk=config.campaign_id)

    def progress(done: int, total: int) -> None:
        reporter.progress(done / max(1, total), f"{done} of {total} answers")

    reporter.log(f"Judge {judge.name} ({judge.kind}) on {campaign.name}.")
    tally = judge_run_execute(
        judge=judge,
        campaign=campaign,
        options=config.options(),
        run_id=run.pk,
        progress=progress,
        should_stop=reporter.should_stop,
        device=compute.device,
    )
    summary = {"judge_id": judge.pk, "campaign_id": campaign.pk, **asdict(tally)}
    reporter.log(
        f"Asked {tally.asked}: {tally.voted} votes stored, {tally.failed} failed, {tally.no_answer_known} without "
        f"a known answer, {tally.counted} counted toward k; ${tally.spent_usd:.4f} spent."
    )
    if tally.stopped == "stopped":
        raise RunCancelled()
    if tally.stopped == "failing":
        raise ArbiterError(_gave_up(tally))
    if tally.asked and not tally.voted:  # a run that produced nothing did not succeed
        raise ArbiterError(_nothing_stored(tally))
    if tally.stopped == "cost_cap":
        cap = judge.config.get("max_cost_usd")
        raise ArbiterError(
            f"The cost cap of ${cap} was reached (${tally.spent_usd:.4f} spent) after {tally.voted} votes; they are "
            f"kept. Raise the judge's max_cost_usd and resume to go on."
        )
    return summary


def _gave_up(tally) -> str:
    """Why a run stopped asking a failing endpoint, in one line, and what to do."""
    kept = {0: "no vote was stored", 1: "the 1 vote stored is kept"}.get(
        tally.voted, f"the {tally.voted} votes stored are kept"
    )
    reason = tally.stop_reason[:300]
    asked = f"{tally.asked} question was" if tally.asked == 1 else f"{tally.asked} questions were"
    return (
        f"Gave up: {reason[:1].upper()}{reason[1:]}. {asked} asked and {kept}; check the "
        "judge's URL, model and key on its page (or start its server), then resume."
    )


def _nothing_stored(tally) -> str:
    """Why a run that was asked something stored no vote, in words."""
    if tally.failed:
        return (
            f"No vote was stored: {tally.failed} of the {tally.asked} answers asked failed"
            + (f" and {tally.no_answer_known} had no known answer" if tally.no_answer_known else "")
            + f". The first failure: {(tally.first_error or 'no reason recorded')[:500]} Check the judge's settings "
            "(its URL, model and key), try them on one comparison (a judge run with max_comparisons 1), then resume."
        )
    return (
        f"No vote was stored: none of the {tally.asked} comparisons asked has a known answer (a task reference or a "
        "recorded outcome), which the rubric judge needs; it invents no vote."
    )


def register_judge_kind() -> None:
    register(
        RunKind(
            name="judge",
            label="Judge a campaign",
            config_class=JudgeRunConfig,
            execute=_execute,
            description="A judge (reward model, rubric or chat model) votes on a campaign's comparisons beside "
            "people, with probes for position bias and self-consistency (docs/judges.md).",
            check=_check,
            lineage=_lineage,
            resumable=True,
            # A rubric or chat judge loads no model: the housekeeping queue, never behind training.
            light=lambda config: Judge.objects.filter(pk=config.judge_id, kind__in=["rubric", "chat"]).exists(),
            # The form starts on a campaign a judge can vote on (one with comparisons), not the newest empty one.
            suggest={
                "campaign_id": lambda: (
                    Campaign.objects.filter(comparisons__is_gold=False)
                    .order_by("-created_at")
                    .values_list("pk", flat=True)
                    .first()
                )
            },
            choices={
                "judge_id": lambda: [(j.pk, f"{j.name} ({j.kind})") for j in Judge.objects.order_by("name")[:200]],
                "campaign_id": lambda: [(c.pk, c.name) for c in Campaign.objects.order_by("-created_at")[:200]],
            },
        )
    )
