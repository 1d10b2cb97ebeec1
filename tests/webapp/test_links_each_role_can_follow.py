"""Every link a role is shown, it can follow (issue 44's walk through the three roles): each
role's pages are crawled from its home page with rows present, and no link answers 403, 404 or
500. A link to a page of another role (an annotator sent to a run's page, a researcher to a
launch form) is a dead end; the template shows it only to the roles that may open it."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlparse

import pytest

from annotate.services.datasets import SnapshotFilters, snapshot_create
from tests.annotate.dataset_fixtures import voted_campaign
from tests.factories import CampaignFactory, UserFactory
from tests.helpers import make_run
from webapp.models import Run

pytestmark = pytest.mark.django_db
HREF = re.compile(r'<a [^>]*href="([^"#]+)')
SKIP = ("/logout", "/download", "/export", "/artifacts/", "/api/", "/static/", "/admin/")
MAX_PAGES = 120


def crawl(client) -> dict[str, tuple[int, str]]:
    """{url: (status, the page that linked it)} for every same-site link reachable from home."""
    seen: dict[str, tuple[int, str]] = {}
    queue = [("/", "")]
    while queue and len(seen) < MAX_PAGES:
        url, source = queue.pop(0)
        if url in seen:
            continue
        response = client.get(url)
        seen[url] = (response.status_code, source)
        if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
            continue
        for href in HREF.findall(response.content.decode()):
            target = urlparse(urljoin(url, href.replace("&amp;", "&")))
            if target.netloc or any(part in target.path for part in SKIP):
                continue
            link = target.path + (f"?{target.query}" if target.query else "")
            if link not in seen:
                queue.append((link, url))
    return seen


@pytest.mark.parametrize("role", ["annotator", "researcher", "admin"])
def test_every_link_a_role_is_shown_it_can_follow(client, role):
    admin = UserFactory(roles=["admin"])
    campaign, _ = voted_campaign([[1, 1, 2], [4, 5, 5], [3, 3, 1], [2, 2, 2]])
    snapshot_create(name="snap", campaigns=[campaign], filters=SnapshotFilters(), created_by=admin)
    make_run(admin)
    CampaignFactory(name="Demo: encyclopedia QA")
    Run.objects.create(  # a first start: the default policy training, named on every home page
        kind="bc",
        name="Policy default-bc (behaviour cloning)",
        status="running",
        progress=0.4,
        config={"policy_name": "default-bc", "rollout_campaign_id": campaign.pk},
    )
    client.force_login(UserFactory(roles=[role]))
    pages = crawl(client)
    dead = {url: found for url, found in pages.items() if found[0] in (403, 404) or found[0] >= 500}
    assert not dead, f"{role}: links to pages it cannot open (url: (status, linked from)): {dead}"
    assert len(pages) > 5, pages
