"""Judgements in progress kept on the server (issue 53): saved and read back by the assignment's
own annotator only, through the API the labeling screen uses (session and CSRF); bad input is a
4xx with a JSON body; the draft ends with its assignment (submitted, skipped, expired)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotate.judgement_input import DRAFT_MAX_BYTES
from annotate.models import Assignment, JudgementDraft
from annotate.services.assignments import (
    Verdict,
    assignment_next,
    assignment_skip,
    assignments_expire,
    judgement_submit,
)
from tests.conftest import token_client
from tests.helpers import make_campaign

pytestmark = pytest.mark.django_db

FIELDS = {"choice": "4", "both_bad": "on", "rationale": "Left never opened the page.", "first_wrong_left": "2"}


def _url(assignment_id: int) -> str:
    return f"/api/v1/assignments/{assignment_id}/draft"


def _leased(annotator, k=1, n=2):
    campaign = make_campaign(n_comparisons=n, k=k)
    return campaign, assignment_next(campaign=campaign, annotator=annotator)


def test_a_draft_is_saved_and_read_back_by_its_annotator(annotator):
    _, assignment = _leased(annotator)
    api = token_client(annotator)
    assert api.get(_url(assignment.pk)).json() == {"fields": {}, "updated_at": None}
    saved = api.put(_url(assignment.pk), {"fields": FIELDS}, format="json")
    assert saved.status_code == 200, saved.content
    again = api.put(_url(assignment.pk), {"fields": {**FIELDS, "choice": "5"}}, format="json")
    assert again.status_code == 200
    body = api.get(_url(assignment.pk)).json()
    assert body["fields"] == {**FIELDS, "choice": "5"} and body["updated_at"]
    assert JudgementDraft.objects.count() == 1


def test_the_labeling_screen_saves_with_its_session_and_csrf_token(annotator):
    _, assignment = _leased(annotator)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(annotator)
    refused = browser.put(_url(assignment.pk), {"fields": FIELDS}, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    page = browser.get(f"/annotate/campaigns/{assignment.comparison.campaign_id}/label/")
    token = page.cookies["csrftoken"].value
    saved = browser.put(
        _url(assignment.pk), {"fields": FIELDS}, content_type="application/json", headers={"X-CSRFToken": token}
    )
    assert saved.status_code == 200, saved.content
    assert JudgementDraft.objects.get().fields == FIELDS


def test_only_the_assignments_annotator_reads_or_writes_its_draft(role_users):
    annotator, admin = role_users["annotator"], role_users["admin"]
    _, assignment = _leased(annotator, k=2)
    token_client(annotator).put(_url(assignment.pk), {"fields": FIELDS}, format="json")
    other = token_client(admin)
    for response in (
        other.get(_url(assignment.pk)),
        other.put(_url(assignment.pk), {"fields": {"choice": "1"}}, format="json"),
        other.delete(_url(assignment.pk)),
    ):
        assert response.status_code == 404 and response.json()["detail"] == "That comparison is not assigned to you."
    assert JudgementDraft.objects.get().fields == FIELDS
    assert token_client(role_users["researcher"]).get(_url(assignment.pk)).status_code == 403


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ([1, 2], "not a list"),
        ({"fields": "choice=4"}, "not a string"),
        ({"fields": {"password": "x"}}, "'password' is not a field of the verdict form"),
        ({"fields": {"choice": 4}}, "a draft field is text, not a number"),
        ({"fields": {"choice": "4" * 201}}, "over 200 characters"),
        ({"fields": {"rationale": "x" * 20_001}}, "over 20,000 characters"),
        ({"fields": {f"rating__d{i}__left": "1" for i in range(65)}}, "65 fields, over the 64 a form has"),
    ],
)
def test_bad_drafts_are_refused_with_the_reason_and_keep_the_one_before(annotator, body, reason):
    _, assignment = _leased(annotator)
    api = token_client(annotator)
    api.put(_url(assignment.pk), {"fields": FIELDS}, format="json")
    response = api.put(_url(assignment.pk), body, format="json")
    assert response.status_code == 400, response.content
    assert reason in response.json()["detail"] and response.json()["detail"].startswith("The draft was not kept")
    assert JudgementDraft.objects.get().fields == FIELDS


def test_a_draft_over_the_size_limit_is_refused_from_its_declared_length(annotator):
    _, assignment = _leased(annotator)
    api = token_client(annotator)
    response = api.put(
        _url(assignment.pk), b"{}", content_type="application/json", CONTENT_LENGTH=str(DRAFT_MAX_BYTES + 1)
    )
    assert response.status_code == 413 and "Nothing was read" in response.json()["detail"]


def test_submitting_skipping_or_expiring_ends_the_draft_and_only_that_one(annotator):
    campaign = make_campaign(n_comparisons=3, k=1)
    api = token_client(annotator)
    done = []
    for end in ("submit", "skip", "expire"):
        assignment = assignment_next(campaign=campaign, annotator=annotator)
        assert api.put(_url(assignment.pk), {"fields": FIELDS}, format="json").status_code == 200
        others = set(JudgementDraft.objects.exclude(assignment=assignment).values_list("assignment_id", flat=True))
        assert others == set()  # the ended ones left nothing behind
        if end == "submit":
            judgement_submit(assignment_id=assignment.pk, annotator=annotator, verdict=Verdict(choice=4))
        elif end == "skip":
            assignment_skip(assignment_id=assignment.pk, annotator=annotator, reason="Unreadable")
        else:
            Assignment.objects.filter(pk=assignment.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
            assert assignments_expire(campaign=campaign) == 1
        assert not JudgementDraft.objects.filter(assignment=assignment).exists(), end
        done.append(assignment.pk)
        # Saving again is refused: the comparison is no longer held for this person.
        late = api.put(_url(assignment.pk), {"fields": FIELDS}, format="json")
        assert late.status_code == 409 and "a draft is kept only while" in late.json()["detail"], end
    assert JudgementDraft.objects.count() == 0


def test_a_draft_survives_other_assignments_ending(role_users):
    annotator, admin = role_users["annotator"], role_users["admin"]
    campaign = make_campaign(n_comparisons=2, k=2)
    mine = assignment_next(campaign=campaign, annotator=annotator)
    theirs = assignment_next(campaign=campaign, annotator=admin)
    token_client(annotator).put(_url(mine.pk), {"fields": FIELDS}, format="json")
    judgement_submit(assignment_id=theirs.pk, annotator=admin, verdict=Verdict(choice=1))
    assert token_client(annotator).get(_url(mine.pk)).json()["fields"] == FIELDS


def test_deleting_a_draft(annotator):
    _, assignment = _leased(annotator)
    api = token_client(annotator)
    api.put(_url(assignment.pk), {"fields": FIELDS}, format="json")
    assert api.delete(_url(assignment.pk)).status_code == 204
    assert api.get(_url(assignment.pk)).json()["fields"] == {}


def test_a_refused_submit_is_kept_as_the_draft_and_a_lost_lease_keeps_none(annotator):
    """The screen sends no save with a submit (one racing it would be refused once the judgement
    is in): a submit the server refuses keeps its form as the draft instead."""
    _, assignment = _leased(annotator, n=2)
    browser = Client()
    browser.force_login(annotator)
    url = f"/annotate/assignments/{assignment.pk}/judgement/"
    refused = browser.post(url, {**FIELDS, "choice": "9", "align": "1"})
    assert refused.status_code == 400
    assert JudgementDraft.objects.get(assignment=assignment).fields == {**FIELDS, "choice": "9"}
    accepted = browser.post(url, FIELDS)
    assert accepted.status_code == 302 and not JudgementDraft.objects.filter(assignment=assignment).exists()
    campaign = assignment.comparison.campaign
    expired = assignment_next(campaign=campaign, annotator=annotator)
    Assignment.objects.filter(pk=expired.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    assert assignments_expire(campaign=campaign) == 1
    late = browser.post(f"/annotate/assignments/{expired.pk}/judgement/", {**FIELDS, "choice": "9"})
    assert late.status_code == 400 and not JudgementDraft.objects.exists()
