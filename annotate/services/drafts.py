"""Judgements in progress, kept on the server: the labeling screen saves its verdict form here as
the person works (debounced) and brings it back on load, in any tab, browser or device. A draft
lives as long as its assignment's lease: submitting, skipping or the lease's expiry removes it
(annotate/services/assignments.py), so it never outlives the comparison it was typed for.
"""

from __future__ import annotations

from django.db import transaction

from annotate.judgement_input import draft_parse
from annotate.models import Assignment, JudgementDraft
from annotate.services.assignments import NOT_YOURS, store_allowed
from webapp.errors import ArbiterError


class DraftNotYours(ArbiterError):
    """No such assignment of the caller's (the API answers 404: whose it is stays unsaid)."""


class DraftClosed(ArbiterError):
    """The assignment is no longer leased (the API answers 409)."""


def _closed_words(assignment: Assignment) -> str:
    return (
        f"This comparison is {assignment.get_status_display().lower()}: "
        "a draft is kept only while the comparison is held for you."
    )


@transaction.atomic
def draft_save(*, assignment_id: int, annotator, fields: dict[str, str]) -> JudgementDraft:
    """Keep the verdict form's `fields` (read by `judgement_input.draft_parse`) as the draft of the
    annotator's leased assignment, replacing the one before. The assignment row is locked, so a
    save and a submit of the same assignment happen one after the other: a save never revives
    the draft of a submitted judgement."""
    assignment = (
        Assignment.objects.select_for_update(of=("self",), no_key=True)
        .select_related("comparison__campaign")
        .filter(pk=assignment_id, annotator=annotator)
        .first()
    )
    if assignment is None:
        raise DraftNotYours(NOT_YOURS)
    if assignment.status != Assignment.Status.LEASED:
        raise DraftClosed(_closed_words(assignment))
    assignment.annotator = annotator
    store_allowed(assignment, "draft")
    draft, _ = JudgementDraft.objects.update_or_create(assignment=assignment, defaults={"fields": fields})
    return draft


# What the verdict form posts beside its fields: neither is part of a judgement in progress.
NOT_DRAFT_FIELDS = ("csrfmiddlewaretoken", "align")


def draft_keep_refused(*, assignment_id: int, annotator, posted) -> JudgementDraft | None:
    """Keep a refused submit's form (`posted`, a QueryDict) as the assignment's draft, so the
    screen need not race its own submit with a save: the submit carries the last change, and a
    refusal keeps it here. None when it cannot be kept (the lease is gone, or the post is not a
    form's fields): the refused page still shows everything as posted."""
    fields = {name: value for name, value in posted.items() if name not in NOT_DRAFT_FIELDS}
    try:
        return draft_save(assignment_id=assignment_id, annotator=annotator, fields=draft_parse({"fields": fields}))
    except ArbiterError:
        return None


def draft_of(*, assignment_id: int, annotator) -> JudgementDraft | None:
    """The draft of the annotator's assignment, None when there is none (refused when the
    assignment is not theirs)."""
    if not Assignment.objects.filter(pk=assignment_id, annotator=annotator).exists():
        raise DraftNotYours(NOT_YOURS)
    return JudgementDraft.objects.filter(assignment_id=assignment_id).first()


@transaction.atomic
def draft_discard(*, assignment_id: int, annotator) -> bool:
    """Drop the draft of the annotator's assignment (the person cleared their form); True when
    there was one."""
    if not Assignment.objects.filter(pk=assignment_id, annotator=annotator).exists():
        raise DraftNotYours(NOT_YOURS)
    deleted, _ = JudgementDraft.objects.filter(assignment_id=assignment_id).delete()
    return bool(deleted)
