"""403 and 404 pages in the site's layout that say what to do, for every way they happen; the favicon."""

import pytest
from django.test import Client

from tests.helpers import Built, make_campaign

pytestmark = pytest.mark.django_db


def _main(response) -> str:
    page = response.content.decode()
    assert '<header class="topbar">' in page and "arbiter.css" in page  # the site's layout
    return page[page.index("<main>") :]


def test_a_role_check_says_which_role_and_how_to_get_it(client, annotator):
    client.force_login(annotator)
    response = client.get("/runs/")
    assert response.status_code == 403
    main = _main(response)
    assert "researcher or admin roles" in main and "You are logged in as ann (annotator)" in main
    assert "Ask an admin" in main and "Log in as someone else" in main and 'href="/"' in main


def test_permission_denied_raised_in_a_view_shows_its_reason(client, researcher):
    built = Built()
    client.force_login(researcher)
    response = client.post(built.url(), {"candidate": built.ppo.pk, "mode": "sampled", "votes_per_comparison": 1})
    assert response.status_code == 403 and "Only admins build human evaluations." in _main(response)
    assert "Go to the evaluations" in _main(response)  # a way back into its section
    comparison = make_campaign(n_comparisons=1, k=1).comparisons.get()
    response = client.post(f"/annotate/comparisons/{comparison.pk}/", {"choice": 1})
    assert response.status_code == 403 and "Only admins record adjudicated labels" in _main(response)


def test_a_missing_row_says_what_is_missing_and_where_to_go(client, researcher):
    client.force_login(researcher)
    response = client.get("/runs/987654/")
    assert response.status_code == 404
    main = _main(response)
    assert "There is no run with this id." in main and 'href="/runs/"' in main and "Go to the runs" in main
    snapshot = _main(client.get("/annotate/datasets/987654/"))
    assert "There is no dataset snapshot with this id." in snapshot
    unknown = client.get("/no/such/page/")
    assert unknown.status_code == 404 and "There is nothing at this address." in _main(unknown)


def test_a_404_raised_with_a_reason_shows_it(client, admin_user):
    client.force_login(admin_user)
    response = client.get("/runs/new/nope/")
    assert response.status_code == 404 and "No such run kind." in _main(response)


def test_a_form_without_its_csrf_token_gets_the_403_page(admin_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    response = client.post("/account/tokens/", {"name": "x"})
    assert response.status_code == 403
    assert "Reload the page and send it again" in _main(response)


def test_the_api_keeps_its_json_errors(client, researcher):
    client.force_login(researcher)
    response = client.get("/api/v1/runs/987654")
    assert response.status_code == 404 and response["Content-Type"].startswith("application/json")


def test_the_favicon_is_linked_and_favicon_ico_leads_to_it(client, researcher):
    client.force_login(researcher)
    page = client.get("/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
