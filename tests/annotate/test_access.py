"""Every annotation route against every role: anonymous, annotator, researcher, admin."""

import pytest
from rest_framework.test import APIClient

from annotate.models import Comparison
from tests.conftest import token_client
from tests.helpers import make_campaign

pytestmark = pytest.mark.django_db

ALL = {"annotator", "researcher", "admin"}


@pytest.fixture
def campaign():
    return make_campaign(n_comparisons=2, k=2)


def page_routes(campaign):
    comparison = Comparison.objects.filter(campaign=campaign).first()
    return {
        "/annotate/campaigns/": ALL,
        f"/annotate/campaigns/{campaign.id}/label/": {"annotator", "admin"},
        f"/annotate/campaigns/{campaign.id}/quality/": {"researcher", "admin"},
        f"/annotate/campaigns/{campaign.id}/disagreements/": {"researcher", "admin"},
        f"/annotate/comparisons/{comparison.id}/": {"researcher", "admin"},
        "/annotate/imports/": {"admin"},
    }


def api_routes(campaign):
    return {
        f"/api/v1/assignments/next?campaign={campaign.id}": {"annotator", "admin"},
        f"/api/v1/campaigns/{campaign.id}/judgements": {"researcher", "admin"},
        f"/api/v1/campaigns/{campaign.id}/agreement": {"researcher", "admin"},
    }


@pytest.mark.parametrize("role", sorted(ALL) + ["anonymous"])
def test_pages_check_the_role(client, role_users, campaign, role):
    if role != "anonymous":
        client.force_login(role_users[role])
    for url, allowed in page_routes(campaign).items():
        status = client.get(url).status_code
        if role == "anonymous":
            assert status == 302, url
        elif role in allowed:
            assert status == 200, (url, role)
        else:
            assert status == 403, (url, role)


@pytest.mark.parametrize("role", sorted(ALL) + ["anonymous"])
def test_api_routes_check_the_role(role_users, campaign, role):
    api = APIClient() if role == "anonymous" else token_client(role_users[role])
    for url, allowed in api_routes(campaign).items():
        status = api.get(url).status_code
        expected = 401 if role == "anonymous" else (200 if role in allowed else 403)
        assert status == expected, (url, role, status)
    for url in ("/api/v1/assignments/1/judgement", "/api/v1/assignments/1/skip"):
        status = api.post(url, {}, format="json").status_code
        expected = 401 if role == "anonymous" else (400 if role in {"annotator", "admin"} else 403)
        assert status == expected, (url, role, status)


@pytest.mark.parametrize("role", ["annotator", "researcher"])
def test_only_admins_adjudicate(client, role_users, campaign, role):
    comparison = Comparison.objects.filter(campaign=campaign).first()
    client.force_login(role_users[role])
    response = client.post(f"/annotate/comparisons/{comparison.id}/", {"choice": 1})
    assert response.status_code == 403
    comparison.refresh_from_db()
    assert comparison.adjudicated_choice is None


def test_admin_adjudicates(client, admin_user, campaign):
    comparison = Comparison.objects.filter(campaign=campaign).first()
    client.force_login(admin_user)
    response = client.post(f"/annotate/comparisons/{comparison.id}/", {"choice": 4, "note": "B cites"})
    assert response.status_code == 302
    comparison.refresh_from_db()
    assert (comparison.adjudicated_choice, comparison.adjudicated_by, comparison.adjudication_note) == (
        4,
        admin_user,
        "B cites",
    )
    assert client.post(f"/annotate/comparisons/{comparison.id}/", {"choice": 7}).status_code == 400


def test_annotators_never_see_other_peoples_votes(client, role_users, campaign):
    client.force_login(role_users["annotator"])
    page = client.get(f"/annotate/campaigns/{campaign.id}/label/").content.decode()
    assert "policy-" not in page  # the policies are never named
    assert client.get(f"/annotate/campaigns/{campaign.id}/quality/").status_code == 403
