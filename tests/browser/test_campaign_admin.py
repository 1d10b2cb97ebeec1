"""A new admin runs a labeling project from start to finish in Chromium, without the Django
admin or a shell: two annotators get accounts, trajectories are imported, a campaign is
created with guidelines and dimensions, filled from the import with a pairing strategy,
labelled (over the API) while its progress bar moves, paused and resumed, and cloned; an
annotator outside its pool is refused by the pages and by the API.

Its screenshots illustrate the README (copied into docs/images/)."""

import json

import pytest

from tests.browser.conftest import login, screenshot
from tests.conftest import token_client
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _trajectories(tmp_path):
    """Two agents on four tasks; each agent is right on half of them."""
    lines = []
    for task in range(4):
        for agent, answer in (("agent-a", "Paris" if task % 2 else "Lyon"), ("agent-b", "Paris")):
            lines.append(
                {
                    "schema": "arbiter.trajectory/v1",
                    "task": {"external_id": f"capital-{task}", "prompt": f"Capital of country {task}?"},
                    "agent": {"name": agent},
                    "steps": [
                        {"kind": "thought", "text": "Search the encyclopedia."},
                        {"kind": "action", "tool": "search", "arguments": {"query": f"country {task}"}},
                        {"kind": "observation", "tool": "search", "content": "Its capital is Paris."},
                        {"kind": "answer", "text": answer},
                    ],
                    "outcome": {"correct": answer == "Paris"},
                }
            )
    path = tmp_path / "my-agents.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    return path


def _add_user(page, username: str):
    page.fill("input[name=username]", username)
    page.check("input[name=roles][value=annotator]")
    page.check("input[name=how][value=password]")
    page.fill("input[name=password]", "orchid-lagoon-63")
    page.click("button:has-text('Add the user')")
    page.wait_for_selector(f"h1:has-text('{username}')")
    page.click("text=← Users")


def _label(user, campaign_id: int, times: int) -> int:
    api = token_client(user)
    made = 0
    for _ in range(times):
        got = api.get(f"/api/v1/assignments/next?campaign={campaign_id}")
        if got.status_code == 204:
            break
        assert got.status_code == 200, got.content
        posted = api.post(
            f"/api/v1/assignments/{got.json()['id']}/judgement",
            {"choice": 2, "ratings": {"correctness": {"left": 4, "right": 2}}},
            format="json",
        )
        assert posted.status_code == 201, posted.content
        made += 1
    return made


def test_an_admin_runs_a_campaign_from_an_empty_install(page, live_server, tmp_path):
    from webapp.models import User

    UserFactory(username="adm", roles=["admin"])
    outsider = UserFactory(username="outsider", roles=["annotator"])
    login(page, live_server, "adm")

    # Two annotators with accounts, on the Users page.
    page.click("nav >> text=Users")
    _add_user(page, "ann1")
    _add_user(page, "ann2")
    screenshot(page, "campaign-admin-1-users")

    # Their own trajectories, uploaded on the Import page.
    page.click("nav >> text=Import")
    page.set_input_files("input[name=file]", str(_trajectories(tmp_path)))
    page.click("button:has-text('Import')")
    page.wait_for_selector("text=Imported 8 trajectories")

    # A campaign with guidelines (previewed while typed), a dimension and a pool.
    page.click("nav >> text=Campaigns")
    page.click("text=New campaign")
    page.fill("input[name=name]", "Capitals, round 1")
    page.fill("textarea[name=guidelines]", "## Prefer the right capital\nA **correct** answer beats a short one.")
    page.wait_for_selector("#guidelines-preview h2:has-text('Prefer the right capital')")
    page.fill("input[name=votes_per_comparison]", "2")
    page.fill("input[name=gold_rate]", "1.5")
    page.click("#add-dimension")
    page.fill("#dimension-rows .dimension-row:last-child input[name=dimension_name]", "correctness")
    page.fill("#dimension-rows .dimension-row:last-child input[name=dimension_description]", "Is the answer right?")
    page.check("input[name=pool_only][value=pool]")
    for name in ("ann1", "ann2"):
        page.check(f".pool-list label:has-text('{name}') input")
    page.click("#add-dimension")  # a second dimension with a description and no name
    page.fill("#dimension-rows .dimension-row:last-child input[name=dimension_description]", "How fast?")
    page.click("button:has-text('Create the campaign')")
    # The browser itself refuses a gold rate over 1, naming the range.
    assert "1" in page.eval_on_selector("input[name=gold_rate]", "e => e.validationMessage")
    page.fill("input[name=gold_rate]", "0")
    page.click("button:has-text('Create the campaign')")
    page.wait_for_selector("text=dimension 2 has no name")  # the server names the row; nothing typed is lost
    assert page.input_value("input[name=name]") == "Capitals, round 1"
    assert page.input_value("#dimension-rows .dimension-row:first-child input[name=dimension_name]") == "correctness"
    screenshot(page, "campaign-admin-2-form-refused")
    page.click("#dimension-rows .dimension-row:last-child [data-remove-dimension]")
    page.click("button:has-text('Create the campaign')")
    page.wait_for_selector("text=Fill it with comparisons below")
    campaign_id = int(page.url.rstrip("/").split("/")[-1])

    # Fill it from the import batch: preview first, then build.
    page.check("input[name=import_batches]")
    page.select_option("select[name=strategy]", "outcome_differs")
    page.click("button:has-text('Preview')")
    page.wait_for_selector("#fill-preview >> text=2 new comparisons")
    screenshot(page, "campaign-admin-3-fill-preview")
    page.click("button:has-text('Build comparisons')")
    page.wait_for_selector("text=Built 2 comparisons")
    assert page.locator("#progress").inner_text().count("0 / 4") == 1

    # The two annotators label over the API; the progress bar moves.
    ann1, ann2 = User.objects.get(username="ann1"), User.objects.get(username="ann2")
    assert _label(ann1, campaign_id, 1) == 1
    page.reload()
    assert "1 / 4" in page.locator("#progress").inner_text()
    assert _label(ann2, campaign_id, 5) == 2
    page.reload()
    assert "3 / 4" in page.locator("#progress").inner_text()
    assert page.locator("#annotators tr", has_text="ann2").locator("td").nth(1).inner_text() == "2"
    screenshot(page, "campaign-admin-4-progress")

    # Pause: no new work for anyone; resume: work again.
    page.click("#status-actions button:has-text('Pause')")
    page.wait_for_selector("text=is paused now")
    refused = token_client(ann1).get(f"/api/v1/assignments/next?campaign={campaign_id}")
    assert refused.status_code == 400 and "paused" in refused.json()["detail"]
    page.click("#status-actions button:has-text('Resume')")
    page.wait_for_selector("text=is active now")
    assert _label(ann1, campaign_id, 5) == 1
    page.reload()
    assert "4 / 4" in page.locator("#progress").inner_text()

    # An annotator outside the pool: not offered it, refused by the page and the API.
    other = page.context.browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    login(other, live_server, "outsider")
    other.goto(f"{live_server.url}/annotate/campaigns/")
    assert other.locator("text=Capitals, round 1").count() == 0
    response = other.goto(f"{live_server.url}/annotate/campaigns/{campaign_id}/label/")
    assert response.status == 403
    other.context.close()
    assert token_client(outsider).get(f"/api/v1/assignments/next?campaign={campaign_id}").status_code == 403

    # Clone it for the next round: the settings come along, the comparisons do not.
    page.fill("input[name=name][placeholder]", "Capitals, round 2")
    page.click("#status-actions button:has-text('Clone')")
    page.wait_for_selector("h1:has-text('Capitals, round 2')")
    assert "correctness (1-5)" in page.locator("#settings").inner_text()
    assert "ann1, ann2" in page.locator("#settings").inner_text()
    assert "No comparisons yet" in page.locator("#progress").inner_text()
    page.click("nav >> text=Campaigns")
    screenshot(page, "campaign-admin-5-list")
    assert page.locator("#campaigns tr", has_text="Capitals, round 1").locator("progress").count() == 1
    assert not page.js_errors
