"""Labeling over REST: next assignment, judgement (idempotent), skip; clear 400s."""

import pytest

from annotate.models import Assignment, Judgement
from tests.conftest import api_rows, token_client
from tests.helpers import make_campaign

pytestmark = pytest.mark.django_db


def test_next_then_judge_in_screen_terms(annotator):
    campaign = make_campaign(n_comparisons=1, k=1, dimensions=["grounding"])
    api = token_client(annotator)
    response = api.get(f"/api/v1/assignments/next?campaign={campaign.id}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) >= {"id", "prompt", "left", "right", "leased_until", "dimensions"}
    assert "policy" not in str(body) and "reference_answer" not in str(body)
    assignment = Assignment.objects.get(pk=body["id"])
    left = assignment.comparison.trajectory_a if assignment.left_is_a else assignment.comparison.trajectory_b
    assert body["left"]["steps"] == left.steps

    url = f"/api/v1/assignments/{body['id']}/judgement"
    payload = {"choice": 2, "first_wrong_step_right": 1, "ratings": {"grounding": {"left": 4}}, "rationale": "ok"}
    first = api.post(url, payload, format="json")
    assert first.status_code == 201, first.content
    again = api.post(url, payload, format="json")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    judgement = Judgement.objects.get()
    assert judgement.choice == (2 if assignment.left_is_a else 4)
    assert api.get(f"/api/v1/assignments/next?campaign={campaign.id}").status_code == 204


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"choice": 9}, "choice"),
        ({}, "choice"),
        ({"choice": 2, "first_wrong_step_left": 50}, "step 50 does not exist"),
        ({"choice": 2, "ratings": {"nope": {"left": 3}}}, "unknown rating dimension"),
    ],
)
def test_bad_judgements_get_400_and_store_nothing(annotator, payload, reason):
    campaign = make_campaign(n_comparisons=1, k=1)
    api = token_client(annotator)
    assignment_id = api.get(f"/api/v1/assignments/next?campaign={campaign.id}").json()["id"]
    response = api.post(f"/api/v1/assignments/{assignment_id}/judgement", payload, format="json")
    assert response.status_code == 400
    assert reason in response.content.decode()
    assert Judgement.objects.count() == 0


def test_judging_another_annotators_assignment_is_refused(role_users):
    campaign = make_campaign(n_comparisons=1, k=2)
    mine = token_client(role_users["annotator"]).get(f"/api/v1/assignments/next?campaign={campaign.id}").json()["id"]
    response = token_client(role_users["admin"]).post(
        f"/api/v1/assignments/{mine}/judgement", {"choice": 1}, format="json"
    )
    assert response.status_code == 400 and "not assigned to you" in response.json()["detail"]
    assert Judgement.objects.count() == 0


def test_skip_over_the_api(annotator):
    campaign = make_campaign(n_comparisons=1, k=1)
    api = token_client(annotator)
    assignment_id = api.get(f"/api/v1/assignments/next?campaign={campaign.id}").json()["id"]
    assert api.post(f"/api/v1/assignments/{assignment_id}/skip", {}, format="json").status_code == 400
    assert api.post(f"/api/v1/assignments/{assignment_id}/skip", {"reason": "broken"}, format="json").status_code == 204
    assert Assignment.objects.get(pk=assignment_id).status == "skipped"


def test_next_needs_an_existing_campaign(annotator):
    api = token_client(annotator)
    assert api.get("/api/v1/assignments/next").status_code == 400
    assert api.get("/api/v1/assignments/next?campaign=424242").status_code == 400


def test_researchers_read_judgements_pseudonymized(role_users):
    campaign = make_campaign(n_comparisons=1, k=1)
    from tests.factories import UserFactory

    ann = UserFactory(username="zelda-k", roles=["annotator"])
    api = token_client(ann)
    assignment_id = api.get(f"/api/v1/assignments/next?campaign={campaign.id}").json()["id"]
    api.post(f"/api/v1/assignments/{assignment_id}/judgement", {"choice": 1}, format="json")
    rows = api_rows(token_client(role_users["researcher"]), f"/api/v1/campaigns/{campaign.id}/judgements")
    assert rows[0]["annotator"] == ann.pseudonym and ann.username not in str(rows)
    agreement = token_client(role_users["researcher"]).get(f"/api/v1/campaigns/{campaign.id}/agreement").json()
    assert agreement["judgements"] == 1 and ann.username not in str(agreement)
