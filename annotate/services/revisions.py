"""Going back to a judgement just submitted (as Potato, Label Studio and Argilla allow): an
annotator may change one of their last few judgements in a campaign while no dataset snapshot
holds it. The change is made in place, so everything that reads judgements (votes, agreement,
quality pages, the next snapshot) reads the new verdict, and each change is recorded
(`JudgementRevision`: the verdict before and after, and when).

A snapshot never changes once it is ready (annotate/models.py, DatasetSnapshot): a judgement a
snapshot holds is refused, and so is any judgement of a campaign while one of its snapshots is
queued or being built (it reads the judgements before it freezes them; its row is committed
before the build starts, so the check sees it). The judgement's row is locked while it changes,
so a snapshot freezing it meanwhile waits for the change. What is left: a snapshot created in
the few milliseconds between this check and the revision's commit may aggregate the verdict
from before while its `raw` rows read the new one; closing that needs the build to lock what it
reads (annotate/services/datasets.py).
"""

from __future__ import annotations

from django.db import transaction

from annotate.judgement_input import Verdict, verdict_in_ab_terms
from annotate.models import DatasetSnapshot, Judgement, JudgementRevision, SnapshotJudgement
from annotate.services.assignments import store_allowed, verdict_checked
from webapp.errors import ArbiterError

REVISABLE_LAST = 5  # an annotator's most recent judgements in a campaign that may be revised
VERDICT_COLUMNS = ("choice", "both_bad", "ratings", "first_wrong_step_a", "first_wrong_step_b", "rationale")
BUILDING = DatasetSnapshot.ACTIVE


class JudgementNotYours(ArbiterError):
    """No such judgement of the caller's (the API answers 404)."""


class JudgementFrozen(ArbiterError):
    """A dataset snapshot holds the judgement, or is being built from its campaign (the API answers 409)."""


def _recent_ids(*, annotator, campaign_id: int) -> list[int]:
    return list(
        Judgement.objects.filter(annotator=annotator, comparison__campaign_id=campaign_id)
        .order_by("-created_at", "-id")
        .values_list("id", flat=True)[:REVISABLE_LAST]
    )


def judgement_last_id(*, annotator, campaign_id: int) -> int | None:
    """The annotator's latest judgement in the campaign, by id; None before their first."""
    return next(iter(_recent_ids(annotator=annotator, campaign_id=campaign_id)[:1]), None)


def judgements_recent(*, annotator, campaign_id: int) -> list[Judgement]:
    """The annotator's last `REVISABLE_LAST` judgements in the campaign, newest first, each with
    `frozen_in` (the name of a snapshot that holds it, else "") and `revision_count`."""
    rows = list(
        Judgement.objects.filter(pk__in=_recent_ids(annotator=annotator, campaign_id=campaign_id))
        .select_related("assignment", "comparison__task")
        .order_by("-created_at", "-id")
    )
    frozen = dict(
        SnapshotJudgement.objects.filter(judgement__in=rows)
        .order_by("snapshot_id")
        .values_list("judgement_id", "snapshot__name")
    )
    counts: dict[int, int] = {}
    for judgement_id in JudgementRevision.objects.filter(judgement__in=rows).values_list("judgement_id", flat=True):
        counts[judgement_id] = counts.get(judgement_id, 0) + 1
    for row in rows:
        row.frozen_in = frozen.get(row.pk, "")
        row.revision_count = counts.get(row.pk, 0)
    return rows


def judgement_verdict(judgement: Judgement) -> dict:
    """The judgement's verdict columns (A/B terms), as a revision records them."""
    return {column: getattr(judgement, column) for column in VERDICT_COLUMNS}


def judgement_frozen_reason(judgement: Judgement) -> str:
    """Why the judgement may not change now, or "" when it may."""
    held = SnapshotJudgement.objects.filter(judgement=judgement).select_related("snapshot").first()
    if held is not None:
        return (
            f"This judgement is in dataset snapshot #{held.snapshot_id} ({held.snapshot.name}): a snapshot "
            "never changes once it is made, so the judgement can no longer be revised."
        )
    campaign = judgement.comparison.campaign
    if DatasetSnapshot.objects.filter(campaigns=campaign, status__in=BUILDING).exists():
        return (
            f"A dataset snapshot of campaign {campaign.name!r} is being built: revise this judgement "
            "when it is done (if the snapshot holds it, it can no longer change)."
        )
    return ""


@transaction.atomic
def judgement_revise(*, judgement_id: int, annotator, verdict: Verdict) -> tuple[Judgement, JudgementRevision | None]:
    """Change one of the annotator's last judgements to `verdict` (screen terms, the sides of the
    assignment it was made on), and record the change. Returns the judgement and the revision
    (None when the verdict is the one already stored: nothing changed, nothing recorded)."""
    judgement = (
        Judgement.objects.select_for_update(of=("self",))
        .select_related("assignment", "comparison__campaign")
        .filter(pk=judgement_id, annotator=annotator)
        .first()
    )
    if judgement is None:
        raise JudgementNotYours("That judgement is not yours.")
    assignment = judgement.assignment
    if assignment is None:
        raise ArbiterError("This judgement was not made on the labeling screen: it has no sides to revise it in.")
    if judgement.pk not in _recent_ids(annotator=annotator, campaign_id=judgement.comparison.campaign_id):
        raise ArbiterError(
            f"Only your last {REVISABLE_LAST} judgements in a campaign can be revised; this one is older."
        )
    reason = judgement_frozen_reason(judgement)
    if reason:
        raise JudgementFrozen(reason)
    assignment.comparison, assignment.annotator = judgement.comparison, annotator
    store_allowed(assignment, "revision", closed_too=True)
    checked = verdict_checked(assignment, verdict)
    before = judgement_verdict(judgement)
    after = {
        **verdict_in_ab_terms(checked, left_is_a=assignment.left_is_a),
        "both_bad": checked.both_bad,
        "rationale": checked.rationale,
    }
    after = {column: after[column] for column in VERDICT_COLUMNS}
    if after == before:
        return judgement, None
    for column, value in after.items():
        setattr(judgement, column, value)
    judgement.save(update_fields=[*VERDICT_COLUMNS, "updated_at"])
    revision = JudgementRevision.objects.create(judgement=judgement, before=before, after=after)
    return judgement, revision


def judgement_revisions(*, judgement: Judgement) -> list[JudgementRevision]:
    """A judgement's changes, oldest first."""
    return list(JudgementRevision.objects.filter(judgement=judgement).order_by("created_at", "id"))
