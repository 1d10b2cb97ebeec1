"""Every web page and form, as every role, with junk in every field: never a server error.

The API has its own fuzzer (test_api_fuzz.py); this walks the URL table of the HTML side,
fills each route's ids with real rows and with absurd ones, and sends GETs with junk query
strings and POSTs with junk form fields, as an admin, a researcher, an annotator and an
anonymous visitor would.
"""

from __future__ import annotations

from collections import Counter

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.factories import UserFactory
from tests.helpers import make_campaign
from webapp.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

HUGE = str(2**70)
JUNK_QUERY = f"?kind=%00%ff%fe&status=%00x&campaign={HUGE}&page=-1&format=nope&filetype=..%2f..&metrics=2&q=%00"
JUNK_FORM = {
    "name": "a\x00b",
    "description": "x" * 30_000,
    "choice": HUGE,
    "both_bad": "maybe",
    "first_wrong_left": HUGE,
    "first_wrong_right": "-5",
    "rationale": "\x00",
    "reason": "r" * 1000,
    "campaign": HUGE,
    "campaigns": [HUGE, "abc", "-1"],
    "min_votes": HUGE,
    "min_agreement": "1e400",
    "include_synthetic": "x",
    "date_from": "2026-13-45",
    "date_to": "99999-01-01",
    "aggregation": "nope",
    "ties": "nope",
    "seed": HUGE,
    "test_fraction": "NaN",
    "policy_id": HUGE,
    "tasks": "1e400",
    "epochs": "-1",
    "idempotency_key": "k" * 200,
    "kind": "\x00",
    "systems": [HUGE],
    "split": "nope",
    "votes_per_comparison": HUGE,
    "differ": "2",
    "samples": "NaN",
}


def _routes(resolver=None, prefix=""):
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            if route.startswith(("admin/", "api/")):
                continue  # the Django admin is Django's; the API has its own fuzzer
            yield from _routes(entry, route)
        elif isinstance(entry, URLPattern) and route != "logout/":  # logging out would end the session
            yield route


def _fill(route: str, ids: dict) -> list[str]:
    """Concrete paths for a route: its ids filled with real rows, then with absurd values."""
    import re

    params = re.findall(r"<(\w+):(\w+)>", route)
    real, absurd = route, route
    for converter, name in params:
        value = {"slug": "rollout", "str": "csv"}.get(converter, str(ids.get(name, 1)))
        real = real.replace(f"<{converter}:{name}>", value)
        absurd = absurd.replace(
            f"<{converter}:{name}>", {"slug": "x" * 300, "str": "..%2f"}.get(converter, "999999999999999999")
        )
    return ["/" + real] + (["/" + absurd] if params else [])


@pytest.fixture
def world():
    campaign = make_campaign(n_comparisons=2, k=2)
    comparison = campaign.comparisons.first()
    run = Run.objects.create(kind="rollout", status="failed", config={})
    users = {role: UserFactory(username=f"f-{role}", roles=[role]) for role in ("admin", "researcher", "annotator")}
    from annotate.services.assignments import assignment_next

    assignment = assignment_next(campaign=campaign, annotator=users["annotator"])
    ids = {
        "campaign_id": campaign.id,
        "comparison_id": comparison.id,
        "run_id": run.id,
        "assignment_id": assignment.id,
        "batch_id": 1,
        "snapshot_id": 1,
        "policy_id": 1,
        "evaluation_id": 1,
        "model_id": 1,
        "token_id": 1,
    }
    return users, ids


@pytest.mark.parametrize("role", ["admin", "researcher", "annotator", "anonymous"])
def test_no_page_or_form_answers_a_server_error(world, role):
    users, ids = world
    client = Client()
    if role != "anonymous":
        client.force_login(users[role])
    failures, seen = [], Counter()
    routes = list(_routes())
    assert len(routes) > 20
    for route in routes:
        for path in _fill(route, ids):
            for method, response in (
                ("GET", lambda: client.get(path + JUNK_QUERY)),
                ("GET htmx", lambda: client.get(path, HTTP_HX_REQUEST="true")),
                ("POST", lambda: client.post(path, JUNK_FORM)),
                (
                    "POST raw",
                    lambda: client.generic(
                        "POST", path, b"name=%ED%A0%80&choice=%FF", content_type="application/x-www-form-urlencoded"
                    ),
                ),
            ):
                status = response().status_code
                seen[status // 100] += 1
                if status >= 500:
                    failures.append(f"{method} {path} -> {status}")
    assert not failures, failures
    if role != "anonymous":  # the pages were reached, not only the login redirect
        assert seen[2] + seen[4] > seen[3], seen
