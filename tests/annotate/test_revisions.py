"""Going back to a judgement just submitted (issue 53): an annotator revises one of their last
judgements, on the revise page or through the API, in the screen terms of the assignment it was
made on; the change is recorded (before, after, when); votes and agreement read the new verdict;
a judgement a dataset snapshot holds is refused with 409 and the reason."""

import re

import pytest
from django.test import Client

from annotate.models import Judgement, JudgementRevision
from annotate.quality import campaign_quality
from annotate.services.assignments import Verdict, assignment_next, judgement_submit
from annotate.services.datasets import snapshot_create
from annotate.services.revisions import REVISABLE_LAST
from tests.conftest import token_client
from tests.helpers import make_campaign

pytestmark = pytest.mark.django_db


def _screen(choice_ab: int, assignment) -> int:
    """An A/B choice in the screen terms of the assignment (the side shown on the left is random)."""
    return choice_ab if assignment.left_is_a else 6 - choice_ab


def _judge(campaign, user, choice_ab: int, **verdict) -> Judgement:
    assignment = assignment_next(campaign=campaign, annotator=user)
    judgement, _ = judgement_submit(
        assignment_id=assignment.pk, annotator=user, verdict=Verdict(choice=_screen(choice_ab, assignment), **verdict)
    )
    return Judgement.objects.select_related("assignment").get(pk=judgement.pk)


def _url(judgement) -> str:
    return f"/api/v1/judgements/{judgement.pk}/revision"


def test_a_revision_changes_the_verdict_records_it_and_agreement_reads_it(role_users):
    annotator, admin = role_users["annotator"], role_users["admin"]
    campaign = make_campaign(n_comparisons=1, k=2)
    mine = _judge(campaign, annotator, 2, rationale="A quotes its page.")
    _judge(campaign, admin, 2)
    assert campaign_quality(campaign=campaign).pairwise.with_ties == 1.0

    api = token_client(annotator)
    body = {"choice": _screen(4, mine.assignment), "both_bad": True, "rationale": "On second look, B."}
    response = api.post(_url(mine), body, format="json")
    assert response.status_code == 200, response.content
    out = response.json()
    assert out["choice"] == 4 and out["both_bad"] and out["rationale"] == "On second look, B."
    [change] = out["revisions"]
    assert change["before"]["choice"] == 2 and change["before"]["rationale"] == "A quotes its page."
    assert change["after"]["choice"] == 4 and change["created_at"]
    mine.refresh_from_db()
    assert (mine.choice, mine.both_bad) == (4, True)
    # Votes and agreement read the revised verdict.
    quality = campaign_quality(campaign=campaign)
    assert quality.judgements == 2 and quality.pairwise.with_ties == 0.0
    # The same verdict again changes nothing and records nothing.
    assert api.post(_url(mine), body, format="json").status_code == 200
    assert JudgementRevision.objects.count() == 1
    assert api.get(_url(mine)).json()["revisions"] == out["revisions"]


def test_a_judgement_a_snapshot_holds_is_refused_with_409(annotator):
    campaign = make_campaign(n_comparisons=1, k=1)
    judgement = _judge(campaign, annotator, 1)
    snapshot = snapshot_create(name="frozen prefs", campaigns=[campaign], test_fraction=0.0)
    assert snapshot.status == "succeeded"
    response = token_client(annotator).post(_url(judgement), {"choice": 3}, format="json")
    assert response.status_code == 409
    assert f"dataset snapshot #{snapshot.pk} (frozen prefs)" in response.json()["detail"]
    judgement.refresh_from_db()
    assert judgement.choice == 1 and not JudgementRevision.objects.exists()


def test_only_ones_own_last_judgements_are_revisable(role_users):
    annotator, admin = role_users["annotator"], role_users["admin"]
    campaign = make_campaign(n_comparisons=REVISABLE_LAST + 1, k=1)
    judgements = [_judge(campaign, annotator, 2) for _ in range(REVISABLE_LAST + 1)]
    api = token_client(annotator)
    oldest = api.post(_url(judgements[0]), {"choice": 3}, format="json")
    assert oldest.status_code == 400 and f"last {REVISABLE_LAST} judgements" in oldest.json()["detail"]
    other = token_client(admin).post(_url(judgements[-1]), {"choice": 3}, format="json")
    assert other.status_code == 404 and other.json()["detail"] == "That judgement is not yours."
    bad = api.post(_url(judgements[-1]), {"choice": 7}, format="json")
    assert bad.status_code == 400 and "choice" in bad.json()["detail"]
    assert api.post(_url(judgements[-1]), {"choice": 3}, format="json").status_code == 200
    assert not JudgementRevision.objects.exclude(judgement=judgements[-1]).exists()


def test_the_revise_page_shows_the_verdict_in_its_screen_terms_and_saves_a_change(annotator):
    campaign = make_campaign(n_comparisons=2, k=1)
    judgement = _judge(campaign, annotator, 1, first_wrong_right=None)
    browser = Client()
    browser.force_login(annotator)
    label = browser.get(f"/annotate/campaigns/{campaign.pk}/label/").content.decode()
    assert f'href="/annotate/campaigns/{campaign.pk}/revise-last/" data-revise-last' in label
    last = browser.get(f"/annotate/campaigns/{campaign.pk}/revise-last/")
    assert last.status_code == 302 and last["Location"] == f"/annotate/judgements/{judgement.pk}/revise/"
    page = browser.get(f"/annotate/judgements/{judgement.pk}/revise/").content.decode()
    shown = _screen(1, judgement.assignment)
    assert re.search(rf'name="choice" value="{shown}" checked', page)
    response = browser.post(f"/annotate/judgements/{judgement.pk}/revise/", {"choice": "3", "rationale": "tie"})
    assert response.status_code == 302 and response["Location"] == f"/annotate/campaigns/{campaign.pk}/label/"
    judgement.refresh_from_db()
    assert (judgement.choice, judgement.rationale) == (3, "tie")
    page = browser.get(f"/annotate/judgements/{judgement.pk}/revise/").content.decode()
    assert 'id="revision-history"' in page and "→ “Tie”" in page

    snapshot_create(name="held", campaigns=[campaign], test_fraction=0.0)
    page = browser.get(f"/annotate/judgements/{judgement.pk}/revise/")
    assert "can no longer be revised" in page.content.decode() and 'class="primary" disabled' in page.content.decode()
    refused = browser.post(f"/annotate/judgements/{judgement.pk}/revise/", {"choice": "5", "rationale": "typed"})
    assert refused.status_code == 409
    text = refused.content.decode()
    assert "can no longer be revised" in text and ">typed</textarea>" in text  # what was typed is kept
    judgement.refresh_from_db()
    assert judgement.choice == 3
