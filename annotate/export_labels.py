"""Who labelled each exported row, in one vocabulary for every format, the dataset card and the
snapshot page: `people`, `simulated` (simulated annotators, `Judgement.synthetic`), `mixed` (a
pair aggregated from both people's and simulated annotators' votes) or `judge` (judges' votes,
AI feedback). The `labelled_by` column of every export says it; `source` (human / ai) is the
snapshot's `feedback` filter word and says only whether the votes came from annotators or judges.
"""

from __future__ import annotations

from django.db.models import BooleanField, Case, Count, Exists, OuterRef, Q, Value, When

from annotate.models import DatasetSnapshot, SnapshotCorrection, SnapshotJudgement, SnapshotPair

LABELLED_BY = ("people", "simulated", "mixed", "judge")
LABELLED_BY_WORDS = {
    "people": "people",
    "simulated": "simulated annotators",
    "mixed": "people and simulated annotators together (one pair aggregates both)",
    "judge": "judges (AI feedback)",
}


def judgement_labelled_by(synthetic: bool) -> str:
    """A judgement's labeller: a simulated annotator's judgement is synthetic, a person's is not."""
    return "simulated" if synthetic else "people"


def pair_labelled_by(snapshot: DatasetSnapshot) -> Case:
    """An expression for a SnapshotPair queryset: who labelled the pair, from the snapshot's own
    judgements of its comparison (a judges' pair has none)."""
    voted = SnapshotJudgement.objects.filter(
        snapshot_id=snapshot.pk, judgement__comparison_id=OuterRef("comparison_id")
    )
    simulated = Exists(voted.filter(judgement__synthetic=True))
    people = Exists(voted.filter(judgement__synthetic=False))
    return Case(
        When(source="ai", then=Value("judge")),
        When(simulated & people, then=Value("mixed")),
        When(simulated, then=Value("simulated")),
        default=Value("people"),
    )


def labelled_by_counts(snapshot: DatasetSnapshot, fmt: str) -> dict[str, int]:
    """Rows of export `fmt` by who labelled them ({people, simulated, mixed, judge}: n), counted
    where the rows come from: the pairs that are not ties (trl, trl_text; dpo and sft with their
    corrections, which are people's, and sft without pairs every vote called both bad), or the
    judgements (raw, steps, kto: a judgement's rows). For kto and steps these are the judgements the
    rows come from, not the rows."""
    counts = dict.fromkeys(LABELLED_BY, 0)
    if fmt in ("trl", "trl_text", "dpo", "sft"):
        pairs = SnapshotPair.objects.filter(snapshot=snapshot).exclude(preferred="tie")
        if fmt == "sft":  # a chosen side is a row unless every vote called both sides bad
            pairs = pairs.annotate(both_bad=pair_both_bad(snapshot)).filter(both_bad=False)
        for who, n in pairs.annotate(who=pair_labelled_by(snapshot)).values_list("who").annotate(n=Count("pk")):
            counts[who] += n
    if fmt in ("sft", "dpo"):
        counts["people"] += SnapshotCorrection.objects.filter(snapshot=snapshot).count()
    if fmt in ("raw", "steps", "kto"):
        members = SnapshotJudgement.objects.filter(snapshot=snapshot)
        if fmt == "kto":  # a tie that is not both bad gives no row
            members = members.exclude(judgement__choice=3, judgement__both_bad=False)
        if fmt == "steps":  # only a judgement with a first wrong step gives rows
            members = members.exclude(
                judgement__first_wrong_step_a__isnull=True, judgement__first_wrong_step_b__isnull=True
            )
        found = members.aggregate(
            simulated=Count("pk", filter=Q(judgement__synthetic=True)),
            people=Count("pk", filter=Q(judgement__synthetic=False)),
        )
        counts["people"] += found["people"]
        counts["simulated"] += found["simulated"]
    return counts


def labelled_by_sentence(counts: dict[str, int], unit: str) -> str:
    """The card's line: "12 pairs labelled by people, 3 by simulated annotators"."""
    parts = [f"{n} by {LABELLED_BY_WORDS[who]}" for who, n in counts.items() if n]
    if not parts:
        return f"No {unit}."
    return f"{unit.capitalize()} labelled " + ", ".join(parts) + "."


def pair_both_bad(snapshot: DatasetSnapshot):
    """An expression for a SnapshotPair queryset: every vote on the pair said both sides were bad
    (the preferred side is only the less bad one). A judges' pair has no such mark: False."""
    voted = SnapshotJudgement.objects.filter(
        snapshot_id=snapshot.pk, judgement__comparison_id=OuterRef("comparison_id")
    )
    return Case(
        When(Exists(voted) & ~Exists(voted.filter(judgement__both_bad=False)), then=Value(True)),
        default=Value(False),
        output_field=BooleanField(),
    )


def both_bad_pairs(snapshot: DatasetSnapshot) -> int:
    """Pairs that are not ties and that every vote called both bad (the card counts them)."""
    pairs = SnapshotPair.objects.filter(snapshot=snapshot).exclude(preferred="tie")
    return pairs.annotate(both_bad=pair_both_bad(snapshot)).filter(both_bad=True).count()


def both_bad_pairs_by_split(snapshot: DatasetSnapshot) -> dict[str, int]:
    """`both_bad_pairs` per split ({train, test}: n)."""
    pairs = SnapshotPair.objects.filter(snapshot=snapshot).exclude(preferred="tie")
    found = pairs.annotate(both_bad=pair_both_bad(snapshot)).filter(both_bad=True)
    return dict(found.values_list("split").annotate(n=Count("pk")).values_list("split", "n"))
