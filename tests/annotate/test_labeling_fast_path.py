"""The short path of the two hot labeling endpoints (annotate/api_fast.py) answers exactly as
the DRF views do, and hands every case it does not fully check over to them."""

import json

import pytest
from rest_framework.test import APIClient

from annotate.models import Judgement
from annotate.services.campaigns import campaign_act
from tests.conftest import token_client
from tests.factories import UserFactory
from tests.helpers import make_campaign

pytestmark = pytest.mark.django_db


def test_the_short_path_answers_like_the_drf_view(annotator, handed_over):
    campaign = make_campaign(n_comparisons=2, k=1, dimensions=["grounding"])
    verdict = {
        "choice": 2,
        "ratings": {"grounding": {"left": 4}},
        "first_wrong_step_right": 0,
        "rationale": "  the left one cites its page \n",
    }
    fast = token_client(annotator)
    got = fast.get(f"/api/v1/assignments/next?campaign={campaign.id}")
    assert got.status_code == 200 and handed_over == []
    short_next = got.json()
    assert short_next["leased_until"].endswith("Z") and short_next["dimensions"] == ["grounding"]
    assert short_next["rating_dimensions"] == [{"name": "grounding", "scale": 5, "description": ""}]
    posted = fast.post(f"/api/v1/assignments/{short_next['id']}/judgement", verdict, format="json")
    assert posted.status_code == 201 and handed_over == []
    short = posted.json()

    slow = APIClient()  # no token: authenticated without one, so the DRF views answer
    slow.force_authenticate(UserFactory(roles=["annotator"]))
    long_next = slow.get(f"/api/v1/assignments/next?campaign={campaign.id}").json()
    long = slow.post(f"/api/v1/assignments/{long_next['id']}/judgement", verdict, format="json").json()
    assert len(handed_over) == 2
    assert set(long_next) == set(short_next) and long_next["leased_until"].endswith("Z")
    assert set(long) == set(short) and long["created_at"].endswith("Z") and short["created_at"].endswith("Z")
    same = ("both_bad", "rationale", "synthetic")  # choice is in A/B terms: it depends on the random side
    assert {k: long[k] for k in same} == {k: short[k] for k in same}
    again = fast.post(f"/api/v1/assignments/{short_next['id']}/judgement", {"choice": 2}, format="json")
    assert again.status_code == 200 and again.json()["id"] == short["id"]


@pytest.mark.parametrize("request_kind", ["bad token", "form body", "not JSON", "extra query"])
def test_what_the_short_path_does_not_check_goes_to_the_drf_view(annotator, handed_over, request_kind):
    campaign = make_campaign(n_comparisons=1, k=1)
    api = token_client(annotator)
    assignment = api.get(f"/api/v1/assignments/next?campaign={campaign.id}").json()["id"]
    url = f"/api/v1/assignments/{assignment}/judgement"
    if request_kind == "bad token":
        api.credentials(HTTP_AUTHORIZATION="Token nope")
        response = api.post(url, {"choice": 1}, format="json")
        assert response.status_code == 401
    elif request_kind == "form body":
        response = api.post(url, {"choice": 1})  # multipart
        assert response.status_code == 201
    elif request_kind == "not JSON":
        response = api.generic("POST", url, b'{"choice": 1', content_type="application/json")
        assert response.status_code == 400 and "not valid" in response.json()["detail"]
    else:
        response = api.get(f"/api/v1/assignments/next?campaign={campaign.id}&x=1")
        assert response.status_code == 200
    assert handed_over, "the DRF view answered"


@pytest.mark.parametrize(("body", "status"), [({"choice": 1, "mood": "fine"}, 201), ({"choice": "one"}, 400)])
def test_the_short_path_reads_every_json_body_itself(annotator, handed_over, body, status):
    """The body is read by the DRF view's parser (annotate/judgement_input.py): an unknown field is
    ignored and a refusal is answered on the short path, as the DRF view would answer it."""
    campaign = make_campaign(n_comparisons=1, k=1)
    api = token_client(annotator)
    assignment = api.get(f"/api/v1/assignments/next?campaign={campaign.id}").json()["id"]
    response = api.post(f"/api/v1/assignments/{assignment}/judgement", body, format="json")
    assert response.status_code == status and handed_over == []
    if status == 400:
        assert response.json()["errors"] == [{"field": "choice", "message": "choice must be 1-5, not 'one'"}]


def test_refusals_on_the_short_path_have_the_api_error_shape(annotator):
    campaign = make_campaign(n_comparisons=2, k=1)
    api = token_client(annotator)
    lease = api.get(f"/api/v1/assignments/next?campaign={campaign.id}").json()["id"]
    campaign_act(campaign=campaign, action="pause")
    paused = api.get(f"/api/v1/assignments/next?campaign={campaign.id}")
    assert paused.status_code == 400 and "paused" in paused.json()["detail"]
    # A lease taken before the pause is still stored.
    assert api.post(f"/api/v1/assignments/{lease}/judgement", {"choice": 3}, format="json").status_code == 201
    bad = api.post(f"/api/v1/assignments/{lease + 1000}/judgement", {"choice": 3}, format="json")
    assert bad.status_code == 400 and "not assigned to you" in bad.json()["detail"]
    pooled = make_campaign(n_comparisons=1, k=1)
    pooled.pool_only = True
    pooled.save()
    refused = api.get(f"/api/v1/assignments/next?campaign={pooled.id}")
    assert refused.status_code == 403 and "pool" in refused.json()["detail"]
    assert Judgement.objects.count() == 1
    assert json.loads(refused.content)  # JSON, never HTML


def test_a_labeling_cycle_is_the_floors_five_statements(annotator):
    """next + submit over the API issue labeling_sql's statements and nothing else (in the
    steady state: the token's lookup cached, the lease sweep not due): the statements
    benchmarks/labeling_cycle.py's raw-SQL floor issues."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotate.services import labeling_sql

    campaign = make_campaign(n_comparisons=3, k=1)
    client = token_client(annotator)
    first = client.get(f"/api/v1/assignments/next?campaign={campaign.id}").json()["id"]  # the token cached,
    client.post(f"/api/v1/assignments/{first}/judgement", {"choice": 4}, format="json")  # the lease sweep done
    with CaptureQueriesContext(connection) as queries:
        got = client.get(f"/api/v1/assignments/next?campaign={campaign.id}")
        posted = client.post(f"/api/v1/assignments/{got.json()['id']}/judgement", {"choice": 4}, format="json")
    assert got.status_code == 200 and posted.status_code == 201
    expected = [
        labeling_sql.CAMPAIGN,
        labeling_sql.LEASE_OR_TAKE,
        labeling_sql.SCREEN,
        labeling_sql.SUBMIT_READ,
        labeling_sql.SUBMIT_WRITE,
    ]
    sent = [q["sql"] for q in queries.captured_queries]
    assert len(sent) == len(expected), sent
    for statement, template in zip(sent, expected):
        head = template.split("%(")[0].strip()  # up to the first parameter, which is sent inlined
        assert statement.strip().startswith(head), (statement[:200], head[:200])
    judgement = Judgement.objects.get(pk=posted.json()["id"])
    assert judgement.comparison.votes == 1 and judgement.comparison.status == "complete"
