"""Reads for the judges' panel of a campaign's quality page and its API: each judge against
people (annotate/judges/agreement.py computes the figures; this module reads the rows).

People are every annotator's judgements on the campaign's non-gold comparisons (simulated
annotators too, flagged on the page as the quality page does); a judge's answers are its
`JudgeVote`s, the first answer as its vote and the probes beside it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass

from annotate.judges.agreement import (
    ComparisonVotes,
    dimensions_in,
    judge_agreement,
    position_bias,
    self_consistency,
)
from annotate.models import Campaign, Judge, Judgement, JudgeVote


@dataclass
class JudgePanel:
    judge_id: int
    name: str
    kind: str
    answered: int  # comparisons with a first answer
    counted: int  # of them, votes counted toward k
    dimensions: list[dict]  # JudgeAgreement of each dimension, as dicts
    position_bias: dict
    self_consistency: dict


def _week(moment) -> str:
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


def _people(campaign: Campaign) -> dict[int, dict]:
    """comparison -> {choices, ratings, latest} of people's judgements (gold left out)."""
    people: dict[int, dict] = defaultdict(lambda: {"choices": [], "ratings": [], "latest": None})
    rows = Judgement.objects.filter(comparison__campaign=campaign, comparison__is_gold=False).values_list(
        "comparison_id", "choice", "ratings", "created_at"
    )
    for comparison_id, choice, ratings, created in rows.iterator(chunk_size=5000):
        entry = people[comparison_id]
        entry["choices"].append(choice)
        entry["ratings"].append(ratings if isinstance(ratings, dict) else {})
        entry["latest"] = created if entry["latest"] is None else max(entry["latest"], created)
    return people


def judge_rows(*, campaign: Campaign, judge_id: int, people: dict[int, dict] | None = None) -> list[ComparisonVotes]:
    """One row per comparison the judge answered first, with people's votes beside it."""
    people = _people(campaign) if people is None else people
    answers: dict[int, dict] = defaultdict(dict)
    for comparison_id, probe, choice, ratings in (
        JudgeVote.objects.filter(judge_id=judge_id, comparison__campaign=campaign, comparison__is_gold=False)
        .values_list("comparison_id", "probe", "choice", "ratings")
        .iterator(chunk_size=5000)
    ):
        answers[comparison_id][probe] = (choice, ratings)
    rows = []
    for comparison_id, probes in sorted(answers.items()):
        first = probes.get(JudgeVote.Probe.FIRST)
        if first is None:
            continue
        mine = people.get(comparison_id)
        rows.append(
            ComparisonVotes(
                comparison_id=comparison_id,
                human=tuple(mine["choices"]) if mine else (),
                week=_week(mine["latest"]) if mine else "",
                judge=first[0],
                swapped=probes.get(JudgeVote.Probe.SWAPPED, (None,))[0],
                repeat=probes.get(JudgeVote.Probe.REPEAT, (None,))[0],
                human_ratings=tuple(mine["ratings"]) if mine else (),
                judge_ratings=first[1] if isinstance(first[1], dict) else None,
            )
        )
    return rows


def campaign_judges(*, campaign: Campaign) -> list[Judge]:
    """The judges that answered in the campaign, by name."""
    ids = JudgeVote.objects.filter(comparison__campaign=campaign).values("judge_id").distinct()
    return list(Judge.objects.filter(pk__in=ids).order_by("name"))


def campaign_judge_panels(*, campaign: Campaign, resamples: int = 1000) -> list[JudgePanel]:
    """Every judge of the campaign against people: per dimension, position bias, self-consistency."""
    people = _people(campaign)
    panels = []
    for judge in campaign_judges(campaign=campaign):
        rows = judge_rows(campaign=campaign, judge_id=judge.pk, people=people)
        dims = dimensions_in(rows)
        panels.append(
            JudgePanel(
                judge_id=judge.pk,
                name=judge.name,
                kind=judge.kind,
                answered=len(rows),
                counted=JudgeVote.objects.filter(
                    judge=judge, comparison__campaign=campaign, probe=JudgeVote.Probe.FIRST, counted=True
                ).count(),
                dimensions=[asdict(judge_agreement(rows, dimension=d, resamples=resamples)) for d in dims],
                position_bias=asdict(position_bias(rows, resamples=resamples)),
                self_consistency=asdict(self_consistency(rows, resamples=resamples)),
            )
        )
    return panels
