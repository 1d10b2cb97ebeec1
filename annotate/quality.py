"""Reads for quality control: agreement per campaign, per-annotator figures, disagreements."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass

from django.db.models import Count

from annotate.agreement import PairwiseAgreement, krippendorff_alpha_ordinal, pairwise_agreement
from annotate.models import Assignment, Campaign, Comparison, Judgement
from core.votes import direction, majority


@dataclass
class AnnotatorStats:
    annotator_id: int
    username: str
    synthetic: bool
    judgements: int
    median_seconds: float | None
    gold_judged: int
    gold_accuracy: float | None
    majority_compared: int
    majority_agreement: float | None
    non_tie: int
    left_rate: float | None
    skips: int


@dataclass
class CampaignQuality:
    judgements: int
    comparisons: int
    complete: int
    alpha: float | None
    pairwise: PairwiseAgreement
    annotators: list[AnnotatorStats]
    votes_per_day: list[tuple[str, int]]
    seconds: list[float]


def _votes_by_comparison(campaign: Campaign, *, include_gold: bool = False) -> dict[int, list[dict]]:
    rows = Judgement.objects.filter(comparison__campaign=campaign)
    if not include_gold:
        rows = rows.filter(comparison__is_gold=False)
    by_comparison: dict[int, list[dict]] = defaultdict(list)
    for row in rows.values(
        "id",
        "comparison_id",
        "annotator_id",
        "choice",
        "seconds",
        "created_at",
        "assignment__left_is_a",
        "comparison__is_gold",
        "comparison__gold_choice",
    ).order_by("comparison_id", "id"):
        by_comparison[row["comparison_id"]].append(row)
    return by_comparison


def campaign_quality(*, campaign: Campaign) -> CampaignQuality:
    all_votes = _votes_by_comparison(campaign, include_gold=True)
    # The same rows without gold, in the same order: read once (the page read them twice).
    votes = {c: vs for c, vs in all_votes.items() if not vs[0]["comparison__is_gold"]}
    units = [[v["choice"] for v in vs] for vs in votes.values()]

    per_user: dict[int, list[dict]] = defaultdict(list)
    for vs in all_votes.values():
        for v in vs:
            per_user[v["annotator_id"]].append(v)

    from django.contrib.auth import get_user_model

    users = get_user_model().objects.in_bulk(list(per_user))
    skips = Counter(
        Assignment.objects.filter(comparison__campaign=campaign, status=Assignment.Status.SKIPPED).values_list(
            "annotator_id", flat=True
        )
    )
    stats = []
    for user_id, mine in per_user.items():
        gold = [v for v in mine if v["comparison__is_gold"]]
        gold_right = sum(direction(v["choice"]) == direction(v["comparison__gold_choice"]) for v in gold)
        compared = agreed = 0
        for v in mine:
            if v["comparison__is_gold"]:
                continue
            others = [direction(o["choice"]) for o in votes[v["comparison_id"]] if o["annotator_id"] != user_id]
            if not others:
                continue
            compared += 1
            agreed += direction(v["choice"]) == majority(others)
        non_tie = [v for v in mine if direction(v["choice"]) != 0 and v["assignment__left_is_a"] is not None]
        # The screen side picked: A on the left and A chosen, or B on the left and B chosen.
        left_picks = sum((direction(v["choice"]) < 0) == v["assignment__left_is_a"] for v in non_tie)
        user = users[user_id]
        stats.append(
            AnnotatorStats(
                annotator_id=user_id,
                username=user.username,
                synthetic=user.is_synthetic,
                judgements=len(mine),
                median_seconds=statistics.median(v["seconds"] for v in mine) if mine else None,
                gold_judged=len(gold),
                gold_accuracy=gold_right / len(gold) if gold else None,
                majority_compared=compared,
                majority_agreement=agreed / compared if compared else None,
                non_tie=len(non_tie),
                left_rate=left_picks / len(non_tie) if non_tie else None,
                skips=skips.get(user_id, 0),
            )
        )
    stats.sort(key=lambda s: (-s.judgements, s.username))
    days = Counter(v["created_at"].date().isoformat() for vs in all_votes.values() for v in vs)
    comparisons = Comparison.objects.filter(campaign=campaign, is_gold=False)
    return CampaignQuality(
        judgements=sum(len(vs) for vs in all_votes.values()),
        comparisons=comparisons.count(),
        complete=comparisons.filter(status=Comparison.Status.COMPLETE).count(),
        alpha=krippendorff_alpha_ordinal(units),
        pairwise=pairwise_agreement(units),
        annotators=stats,
        votes_per_day=sorted(days.items()),
        seconds=[v["seconds"] for vs in all_votes.values() for v in vs],
    )


def comparisons_in_disagreement(*, campaign: Campaign, limit: int = 200):
    """Comparisons whose votes point different ways (A vs B, or a tie against a side)."""
    votes = _votes_by_comparison(campaign)
    split = [cid for cid, vs in votes.items() if len({direction(v["choice"]) for v in vs}) > 1]
    return (
        Comparison.objects.filter(pk__in=split[:limit])
        .select_related("task", "adjudicated_by")
        .annotate(n_votes=Count("judgements"))
        .order_by("adjudicated_choice", "-n_votes", "id")
    )


def _scalar(rows, function: str, column: str = "id", output_field=None):
    """COUNT or SUM over `rows` as a scalar subquery, so that several figures share one query
    (the function is not a Django aggregate, so the subquery has no GROUP BY)."""
    from django.db.models import F, Func, IntegerField, Subquery, Value
    from django.db.models.functions import Coalesce

    output_field = output_field or IntegerField()
    figure = rows.order_by().annotate(figure=Func(F(column), function=function, output_field=output_field))
    return Coalesce(Subquery(figure.values("figure")), Value(0), output_field=output_field)


LEFT_COUNTED_UP_TO = 1000


def annotator_counts(*, campaign: Campaign, annotator, now=None) -> dict:
    """The comparison screen's counter for one annotator, in two queries:

    - `left_for_you`: comparisons they may still be given (open, not gold, a slot free,
      never assigned to them) plus the ones they hold now: the same figure as
      `annotate.selectors.campaign_progress` gives the Campaigns page, counted up to
      `LEFT_COUNTED_UP_TO` free ones (`left_more` then says there are more, and the screen
      shows "1000+"): the screen asks after every judgement, and counting every free
      comparison of a 20,000-comparison campaign was a third of the time from Enter to the
      next comparison (benchmarks/RESULTS.md, issue 56);
    - `judged`: their judgements in this campaign; `today`: those since midnight
      (settings.TIME_ZONE), and `tz`, that zone's name;
    - `per_hour`: today's judgements per hour of today's time on task (the sum of each
      one's seconds, lease to submit, as the server measures them); None before a minute
      of it, when the figure would mean little.
    """
    from django.db.models import FloatField
    from django.utils import timezone

    now = now or timezone.now()
    local = timezone.localtime(now)
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    free = Comparison.objects.filter(
        campaign=campaign, is_gold=False, status=Comparison.Status.OPEN, slots_taken__lt=campaign.votes_per_comparison
    ).exclude(assignments__annotator=annotator)  # an anti-join: a few ms over 30,000 comparisons
    held = Assignment.objects.filter(
        annotator=annotator, comparison__campaign=campaign, status=Assignment.Status.LEASED, leased_until__gt=now
    )
    mine = Judgement.objects.filter(comparison__campaign=campaign, annotator=annotator)
    today = mine.filter(created_at__gte=midnight)
    # SELECT COUNT(*) FROM (... LIMIT bound + 1): the scan stops at the bound. (As a scalar
    # subquery of the query below, PostgreSQL joined it back to every comparison of the campaign.)
    free_counted = free.values("id")[: LEFT_COUNTED_UP_TO + 1].count()
    figures = (
        Campaign.objects.filter(pk=campaign.pk)
        .values(
            held=_scalar(held, "COUNT"),
            judged=_scalar(mine, "COUNT"),
            today=_scalar(today, "COUNT"),
            seconds=_scalar(today, "SUM", "seconds", FloatField()),
        )
        .get()
    )
    seconds = figures["seconds"] or 0.0
    return {
        "left_for_you": min(free_counted, LEFT_COUNTED_UP_TO) + figures["held"],
        "left_more": free_counted > LEFT_COUNTED_UP_TO,
        "judged": figures["judged"],
        "today": figures["today"],
        "seconds_today": seconds,
        "per_hour": figures["today"] * 3600 / seconds if seconds >= 60 else None,
        "tz": local.tzname(),
    }
