"""Dataset snapshots: choose judgements by filters, aggregate them, split by task, freeze.

A small snapshot is built in the request; a large one by a job on the `default` queue
(`SNAPSHOT_INLINE_MAX_JUDGEMENTS`), with its progress on the snapshot page. The build
reads the votes in a stream, then writes the frozen membership in one transaction, so a
failed build leaves no half-written snapshot: only its row, marked failed with the reason.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from datetime import timezone as dt_timezone

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from annotate.agreement import krippendorff_alpha_ordinal, pairwise_agreement
from annotate.models import (
    Campaign,
    Correction,
    DatasetSnapshot,
    Judge,
    Judgement,
    JudgeVote,
    SnapshotCorrection,
    SnapshotJudgement,
    SnapshotPair,
)
from annotate.preferences import FEEDBACK, RULES, aggregate, task_split
from webapp.errors import ArbiterError
from webapp.jobs import Heartbeat, job_claim, job_dispatch, job_finish, task_send

log = logging.getLogger(__name__)
WRITE_BATCH = 5000


@dataclass(frozen=True)
class SnapshotFilters:
    min_votes: int = 1
    min_agreement: float = 0.0
    include_synthetic: bool = False
    date_from: date | None = None
    date_to: date | None = None
    # Whose votes: people's (the default), judges' (AI feedback), or both kept apart (a comparison
    # people voted on is theirs; one only judges voted on is the judges'). `judges`: which (all: empty).
    feedback: str = "human"
    judges: tuple[int, ...] = ()

    def as_json(self) -> dict:
        return {
            "min_votes": self.min_votes,
            "min_agreement": self.min_agreement,
            "include_synthetic": self.include_synthetic,
            "exclude_gold": True,
            "date_from": self.date_from.isoformat() if self.date_from else None,
            "date_to": self.date_to.isoformat() if self.date_to else None,
            "feedback": self.feedback,
            "judges": list(self.judges),
        }

    @classmethod
    def from_json(cls, data: dict) -> SnapshotFilters:
        return cls(
            min_votes=data.get("min_votes", 1),
            min_agreement=data.get("min_agreement", 0.0),
            include_synthetic=data.get("include_synthetic", False),
            date_from=date.fromisoformat(data["date_from"]) if data.get("date_from") else None,
            date_to=date.fromisoformat(data["date_to"]) if data.get("date_to") else None,
            feedback=data.get("feedback", "human"),
            judges=tuple(data.get("judges") or ()),
        )


def matching_judgements(*, campaign_ids: list[int], filters: SnapshotFilters) -> QuerySet[Judgement]:
    """Judgements of the campaigns that pass the per-judgement filters (gold never does)."""
    qs = Judgement.objects.filter(comparison__campaign_id__in=campaign_ids, comparison__is_gold=False)
    if not filters.include_synthetic:
        qs = qs.filter(synthetic=False)
    if filters.date_from:
        qs = qs.filter(created_at__gte=datetime.combine(filters.date_from, time.min, tzinfo=dt_timezone.utc))
    if filters.date_to:
        end = datetime.combine(filters.date_to + timedelta(days=1), time.min, tzinfo=dt_timezone.utc)
        qs = qs.filter(created_at__lt=end)
    return qs


def matching_judge_votes(*, campaign_ids: list[int], filters: SnapshotFilters) -> QuerySet[JudgeVote]:
    """Judges' first votes on the campaigns' comparisons (gold never), of the judges the filters name."""
    qs = JudgeVote.objects.filter(
        comparison__campaign_id__in=campaign_ids, comparison__is_gold=False, probe=JudgeVote.Probe.FIRST
    )
    return qs.filter(judge_id__in=filters.judges) if filters.judges else qs


def accepted_corrections(*, campaign_ids: list[int]) -> QuerySet[Correction]:
    """Corrections made in the campaigns and accepted by a reviewer: what a snapshot freezes."""
    return Correction.objects.filter(comparison__campaign_id__in=campaign_ids, status=Correction.Status.ACCEPTED)


def _validate(*, name, campaigns, filters, aggregation, ties, test_fraction) -> None:
    problems = []
    if filters.feedback not in FEEDBACK:
        problems.append(f"feedback must be one of {', '.join(FEEDBACK)}")
    missing = set(filters.judges) - set(Judge.objects.filter(pk__in=filters.judges).values_list("pk", flat=True))
    if missing:
        problems.append(f"no judge with id {', '.join(map(str, sorted(missing)))}")
    if not name.strip():
        problems.append("a snapshot needs a name")
    if not campaigns:
        problems.append("choose at least one campaign")
    if aggregation not in RULES:
        problems.append(f"aggregation must be one of {', '.join(RULES)}")
    if ties not in ("keep", "drop"):
        problems.append("ties must be keep or drop")
    if not 0 <= test_fraction < 1:
        problems.append("test_fraction must be at least 0 and below 1")
    if filters.min_votes < 1:
        problems.append("min_votes must be at least 1")
    if not 0 <= filters.min_agreement <= 1:
        problems.append("min_agreement must be between 0 and 1")
    if filters.date_from and filters.date_to and filters.date_from > filters.date_to:
        problems.append("date_from is after date_to")
    if problems:
        raise ArbiterError("The snapshot was not created: " + "; ".join(problems) + ".")


def snapshot_create(
    *,
    name: str,
    campaigns: list[Campaign],
    filters: SnapshotFilters = SnapshotFilters(),
    aggregation: str = "majority",
    ties: str = "keep",
    seed: int = 0,
    test_fraction: float = 0.2,
    description: str = "",
    created_by=None,
) -> DatasetSnapshot:
    """Create a snapshot: built now when small, by a job when large. Nothing matches: an error."""
    _validate(
        name=name, campaigns=campaigns, filters=filters, aggregation=aggregation, ties=ties, test_fraction=test_fraction
    )
    ids = [c.id for c in campaigns]
    n = 0 if filters.feedback == "ai" else matching_judgements(campaign_ids=ids, filters=filters).count()
    if filters.feedback != "human":
        n += matching_judge_votes(campaign_ids=ids, filters=filters).count()
    n += accepted_corrections(campaign_ids=ids).count()
    if n == 0:
        what = {"human": "judgement", "ai": "judge vote", "both": "judgement or judge vote"}[filters.feedback]
        raise ArbiterError(f"No {what} matches these campaigns and filters; nothing was created.")
    with transaction.atomic():
        snapshot = DatasetSnapshot.objects.create(
            name=name.strip(),
            description=description,
            filters=filters.as_json(),
            aggregation=aggregation,
            ties=ties,
            seed=seed,
            test_fraction=test_fraction,
            created_by=created_by,
            heartbeat_at=timezone.now(),
        )
        snapshot.campaigns.set(campaigns)
    job_dispatch(
        snapshot,
        inline=n <= settings.SNAPSHOT_INLINE_MAX_JUDGEMENTS,
        run=lambda pk: snapshot_build(snapshot_id=pk),
        task="annotate.snapshot_build",
    )
    if snapshot.status == DatasetSnapshot.Status.FAILED:
        # Built in the request: the caller gets the reason; the failed build stays listed with it,
        # as a failed import or fill does.
        raise ArbiterError(snapshot.message)
    return snapshot


def _progress(snapshot_id: int, value: float) -> None:
    DatasetSnapshot.objects.filter(pk=snapshot_id).update(progress=round(value, 3), heartbeat_at=timezone.now())


def snapshot_build(*, snapshot_id: int) -> None:
    """Aggregate, split and freeze (a job: webapp/jobs.py). A snapshot is claimed once."""
    if not job_claim(DatasetSnapshot, snapshot_id):
        return
    snapshot = DatasetSnapshot.objects.get(pk=snapshot_id)
    try:
        with Heartbeat(DatasetSnapshot, snapshot.pk):
            _build(snapshot)
    except ArbiterError as exc:
        _fail(snapshot, exc.message)
    except Exception as exc:
        log.exception("snapshot %s failed", snapshot_id)
        _fail(snapshot, f"The build failed: {type(exc).__name__}: {exc}")
        raise
    else:
        # The default download's bundle, by the worker (even when this build ran in a request).
        transaction.on_commit(lambda: task_send("annotate.snapshot_bundle", snapshot_id))


def _fail(snapshot: DatasetSnapshot, message: str) -> None:
    job_finish(
        DatasetSnapshot, snapshot.pk, status=DatasetSnapshot.Status.FAILED, message=message, error=message, progress=0
    )


def _build(snapshot: DatasetSnapshot) -> None:
    filters = SnapshotFilters.from_json(snapshot.filters)
    campaign_ids = list(snapshot.campaigns.values_list("id", flat=True))
    votes = matching_judgements(campaign_ids=campaign_ids, filters=filters)
    total = votes.count()
    rows = votes.order_by("comparison_id", "id").values_list(
        "id",
        "comparison_id",
        "choice",
        "comparison__task_id",
        "comparison__task__external_id",
        "comparison__adjudicated_choice",
        "assignment__left_is_a",
    )
    pairs: list[SnapshotPair] = []
    members: list[tuple[int, str, str, bool | None]] = []  # judgement, split, task id, shown left is A
    units: list[list[int]] = []
    current: list[tuple] = []
    seen = 0
    dropped = {"min_votes": 0, "min_agreement": 0, "ties": 0}

    def close(group: list[tuple]) -> None:
        choices = [r[2] for r in group]
        _, comparison_id, _, task_id, external_id, adjudicated, _ = group[0]
        if len(choices) < filters.min_votes:
            dropped["min_votes"] += 1
            return
        pair = _pair(snapshot, filters, dropped, choices, comparison_id, task_id, external_id, adjudicated=adjudicated)
        if pair is not None:
            pairs.append(pair)
            members.extend((r[0], pair.split, external_id, r[6]) for r in group)
            units.append(choices)

    voted_by_people: set[int] = set()
    for row in rows.iterator(chunk_size=5000) if filters.feedback != "ai" else ():
        voted_by_people.add(row[1])
        if current and row[1] != current[0][1]:
            close(current)
            current = []
        current.append(row)
        seen += 1
        if seen % 20000 == 0:
            _progress(snapshot.pk, 0.8 * seen / max(total, 1))
    if current:
        close(current)
    judges: list[dict] = []
    if filters.feedback != "human":
        judges = _judge_pairs(snapshot, filters, campaign_ids, voted_by_people, pairs, dropped)
    corrections = [
        (correction_id, task_split(external_id, seed=snapshot.seed, test_fraction=snapshot.test_fraction))
        for correction_id, external_id in accepted_corrections(campaign_ids=campaign_ids)
        .order_by("id")
        .values_list("id", "original__task__external_id")
    ]
    if not pairs and not corrections:
        raise ArbiterError(
            "No comparison is left after the filters "
            f"(dropped: {dropped['min_votes']} below min_votes, {dropped['min_agreement']} below "
            f"min_agreement, {dropped['ties']} ties); nothing was frozen."
        )
    _progress(snapshot.pk, 0.8)

    stats = _stats(pairs, members, corrections, units, dropped, filters.feedback, judges)
    _freeze(snapshot, pairs, members, corrections, _content_hash(pairs, members, corrections), stats)


def _content_hash(pairs, members, corrections) -> str:
    """The frozen rows' fingerprint: two snapshots with the same pairs, judgements and corrections share it."""
    digest = hashlib.sha256()
    for p in pairs:
        marked = "" if p.source == "human" else f"|{p.source}"  # people's pairs hash as they always did
        digest.update(f"{p.comparison_id}|{p.split}|{p.preferred}|{p.margin}|{p.votes}{marked}\n".encode())
    for judgement_id, *_ in members:
        digest.update(f"j{judgement_id}\n".encode())
    for correction_id, split in corrections:
        digest.update(f"c{correction_id}|{split}\n".encode())
    return digest.hexdigest()


def _stats(pairs, members, corrections, units, dropped: dict, feedback: str, judges: list[dict]) -> dict:
    """A snapshot's figures: its pairs, splits, ties, what the filters dropped, and the agreement of its votes."""
    agreement = pairwise_agreement(units)
    stats = {
        "pairs": len(pairs),
        "judgements": len(members),
        "train_pairs": sum(p.split == "train" for p in pairs),
        "test_pairs": sum(p.split == "test" for p in pairs),
        "train_tasks": len({p.task_id for p in pairs if p.split == "train"}),
        "test_tasks": len({p.task_id for p in pairs if p.split == "test"}),
        "ties": sum(p.preferred == "tie" for p in pairs),
        "train_ties": sum(p.preferred == "tie" and p.split == "train" for p in pairs),
        "test_ties": sum(p.preferred == "tie" and p.split == "test" for p in pairs),
        "dropped": dropped,
        "feedback": feedback,
        "sources": {"human": sum(p.source == "human" for p in pairs), "ai": sum(p.source == "ai" for p in pairs)},
        "judges": judges,
        "corrections": len(corrections),
        "train_corrections": sum(split == "train" for _, split in corrections),
        "test_corrections": sum(split == "test" for _, split in corrections),
        "agreement": {
            "krippendorff_alpha_ordinal": krippendorff_alpha_ordinal(units),
            "pairwise_with_ties": agreement.with_ties,
            "pairwise_excluding_ties": agreement.excluding_ties,
            "pairwise_tie_as_half": agreement.tie_as_half,
            "pairs_of_votes": agreement.pairs,
        },
    }
    return json.loads(json.dumps(stats))


def _freeze(snapshot: DatasetSnapshot, pairs, members, corrections, content_hash: str, stats: dict) -> None:
    """The snapshot's rows written and the snapshot marked succeeded, in one transaction."""
    with transaction.atomic():
        SnapshotPair.objects.bulk_create(pairs, batch_size=WRITE_BATCH)
        for start in range(0, len(members), WRITE_BATCH):
            SnapshotJudgement.objects.bulk_create(
                [
                    SnapshotJudgement(
                        snapshot_id=snapshot.pk, judgement_id=j, split=s, task_external_id=task, left_is_a=left
                    )
                    for j, s, task, left in members[start : start + WRITE_BATCH]
                ],
                batch_size=WRITE_BATCH,
            )
        SnapshotCorrection.objects.bulk_create(
            [SnapshotCorrection(snapshot_id=snapshot.pk, correction_id=c, split=split) for c, split in corrections],
            batch_size=WRITE_BATCH,
        )
        DatasetSnapshot.objects.filter(pk=snapshot.pk).update(
            status=DatasetSnapshot.Status.SUCCEEDED,
            progress=1.0,
            content_hash=content_hash,
            stats=stats,
            message="",
            heartbeat_at=timezone.now(),
            finished_at=timezone.now(),
        )


def _pair(
    snapshot, filters, dropped: dict, choices, comparison_id, task_id, external_id, *, adjudicated=None, source="human"
) -> SnapshotPair | None:
    """One comparison's votes as its frozen preference, or None (counted in `dropped`) when the
    agreement or tie rules leave it out: the same rules for people's votes and judges'."""
    pref = aggregate(choices, snapshot.aggregation, adjudicated=adjudicated)
    if pref.agreement < filters.min_agreement:
        dropped["min_agreement"] += 1
        return None
    if pref.preferred == "tie" and snapshot.ties == "drop":
        dropped["ties"] += 1
        return None
    return SnapshotPair(
        snapshot_id=snapshot.pk,
        comparison_id=comparison_id,
        task_id=task_id,
        split=task_split(external_id, seed=snapshot.seed, test_fraction=snapshot.test_fraction),
        preferred=pref.preferred,
        margin=pref.margin,
        votes=pref.votes,
        agreement=pref.agreement,
        source=source,
    )


def _judge_pairs(snapshot, filters, campaign_ids, voted_by_people: set[int], pairs: list, dropped: dict) -> list[dict]:
    """Add the judges' pairs (source ai): the majority of the chosen judges' first votes on each
    comparison people did not vote on (all of them for AI feedback alone). An admin's ruling is
    people's, so it does not enter a judges' pair; min_votes is about people's votes."""
    votes = matching_judge_votes(campaign_ids=campaign_ids, filters=filters).order_by("comparison_id", "judge_id")
    rows = votes.values_list(
        "comparison_id", "choice", "judge_id", "comparison__task_id", "comparison__task__external_id"
    )
    by_comparison: dict[int, list[tuple]] = {}
    for row in rows.iterator(chunk_size=5000):
        if row[0] not in voted_by_people:
            by_comparison.setdefault(row[0], []).append(row)
    used: set[int] = set()
    for comparison_id, group in by_comparison.items():
        _, _, _, task_id, external_id = group[0]
        pair = _pair(
            snapshot, filters, dropped, [r[1] for r in group], comparison_id, task_id, external_id, source="ai"
        )
        if pair is not None:
            pairs.append(pair)
            used.update(r[2] for r in group)
    pairs.sort(key=lambda p: p.comparison_id)
    return [{"id": j.pk, "name": j.name, "kind": j.kind} for j in Judge.objects.filter(pk__in=used).order_by("name")]


SNAPSHOT_STALE_REASON = "The worker stopped before the snapshot was built; nothing was frozen. Create it again."


def snapshot_create_from_input(*, data: dict, campaigns: list[Campaign], created_by) -> DatasetSnapshot:
    """`snapshot_create` from validated form or serializer fields (the web UI and the API)."""
    filters = SnapshotFilters(
        min_votes=data["min_votes"],
        min_agreement=data["min_agreement"],
        include_synthetic=data["include_synthetic"],
        date_from=data.get("date_from"),
        date_to=data.get("date_to"),
        feedback=data.get("feedback") or "human",
        judges=tuple(getattr(j, "pk", j) for j in data.get("judges") or ()),  # a form gives rows, the API ids
    )
    return snapshot_create(
        name=data["name"],
        description=data.get("description", ""),
        campaigns=campaigns,
        filters=filters,
        aggregation=data["aggregation"],
        ties=data["ties"],
        seed=data["seed"],
        test_fraction=data["test_fraction"],
        created_by=created_by,
    )
