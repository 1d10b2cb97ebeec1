"""Every page of the app, as a signed-in admin sees it, on a phone (390 px) and a desktop (1440 px).

Each page is opened with rows present (campaigns with votes, a dataset, a reward model, a run
with metrics and artifacts, an evaluation, users, an import), and must not scroll sideways,
raise a JavaScript error, break the Content-Security-Policy or fail to load a file it asks for.
A screenshot of each page at each width is kept in test-output/screenshots/ (page-<width>-<name>.png).
The route table is checked against the list below, so a new page cannot be left out unnoticed.
"""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from annotate.models import ImportBatch
from annotate.services.datasets import SnapshotFilters, snapshot_create
from rewardmodel.models import RewardModel
from tests.annotate.dataset_fixtures import voted_campaign
from tests.browser.conftest import login, screenshot
from tests.factories import UserFactory
from tests.helpers import Built, make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1440)
# Routes that are not pages: forms post to them, files download from them, fragments poll them.
NOT_PAGES = {
    "logout/": "POST: logs out",
    "health": "JSON for load balancers",
    "favicon.ico": "a redirect to the icon",
    "account/tokens/<id:token_id>/revoke": "POST",
    "annotate/campaigns/markdown-preview": "POST fragment",
    "annotate/campaigns/<id:campaign_id>/status": "POST",
    "annotate/campaigns/<id:campaign_id>/clone": "POST",
    "annotate/campaigns/<id:campaign_id>/fill": "POST",
    "annotate/campaigns/<id:campaign_id>/gold": "POST",
    "annotate/campaigns/<id:campaign_id>/gold/promote": "POST",
    "annotate/campaigns/<id:campaign_id>/order/": "POST",
    "annotate/campaigns/<id:campaign_id>/fills/<id:fill_id>": "htmx fragment",
    "annotate/assignments/<id:assignment_id>/judgement/": "POST",
    "annotate/assignments/<id:assignment_id>/skip/": "POST",
    "annotate/assignments/<id:assignment_id>/correction/": "POST",
    "annotate/corrections/<id:correction_id>/state/": "htmx fragment",
    "annotate/datasets/<id:snapshot_id>/download": "a zip file",
    "runs/<id:run_id>/artifacts/<path:name>": "a file",
    "runs/<id:run_id>/cancel": "POST",
    "runs/<id:run_id>/resume": "POST",
    "training/evaluations/<id:evaluation_id>/next-round/": "POST",
    "training/evaluations/<id:evaluation_id>/export.<str:fmt>": "a JSON or CSV file",
    "reward-models/<id:model_id>/use": "POST",
    "team/users/<id:user_id>/edit": "POST",
    "team/users/<id:user_id>/deactivate": "POST",
    "team/users/<id:user_id>/reactivate": "POST",
    "team/users/<id:user_id>/password": "POST",
    "team/users/<id:user_id>/tokens": "POST",
    "team/users/<id:user_id>/tokens/<id:token_id>/revoke": "POST",
}
# In each chart: every text inside the drawing (no clipped y label or title), and x labels that do
# not run into each other (straight ones by their boxes; turned ones by the room between them).
CHART_PROBLEMS = """() => {
  const problems = [];
  document.querySelectorAll('svg.chart').forEach((svg, n) => {
    const frame = svg.getBoundingClientRect();
    const name = svg.getAttribute('aria-label');
    svg.querySelectorAll('text').forEach(t => {
      const r = t.getBoundingClientRect();
      if (r.width && (r.left < frame.left - 1 || r.right > frame.right + 1 || r.top < frame.top - 1 || r.bottom > frame.bottom + 1))
        problems.push(`${name}: "${t.textContent}" is cut by the chart's edge`);
    });
    const labels = [...svg.querySelectorAll('text.x-label')];
    const straight = labels.filter(t => !t.getAttribute('transform')).map(t => t.getBoundingClientRect());
    for (let i = 1; i < straight.length; i++)
      if (straight[i].left < straight[i - 1].right) problems.push(`${name}: x labels ${i - 1} and ${i} overlap`);
    const turned = labels.filter(t => t.getAttribute('transform')).map(t => t.getBoundingClientRect().right);
    const size = turned.length ? parseFloat(getComputedStyle(labels[0]).fontSize) : 0;
    for (let i = 1; i < turned.length; i++)
      if ((turned[i] - turned[i - 1]) * Math.SQRT1_2 < size * 0.9) problems.push(`${name}: turned x labels ${i - 1} and ${i} touch`);
  });
  return problems;
}"""


def _routes(resolver=None, prefix=""):
    for entry in (resolver or get_resolver()).url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            if not route.startswith(("admin/", "api/")):  # Django's admin is Django's; the API is JSON
                yield from _routes(entry, route)
        elif isinstance(entry, URLPattern):
            yield route


def _correction(comparison, author):
    """A pending correction of the comparison's A side's answer, stored as edited."""
    from annotate.services.corrections import CorrectionIn, correction_create

    original = comparison.trajectory_a
    step = next((i for i, s in enumerate(original.steps) if s["kind"] == "answer"), len(original.steps))
    fix = CorrectionIn(kind="answer", step=step, answer="The answer the page gives.")
    return correction_create(original=original, correction=fix, author=author, comparison=comparison)[0]


def _judge_with_votes(campaign):
    """A chat judge that answered every comparison (first, swapped and again), with its audit records."""
    from annotate.models import Judge, JudgeCall, JudgeVote

    judge = Judge.objects.create(
        name="gpt-like judge", kind="chat", config={"base_url": "http://127.0.0.1:9/v1", "model": "judge-1"}
    )
    for n, comparison in enumerate(campaign.comparisons.order_by("id")):
        for probe, choice in (("first", 2), ("swapped", 4 if n % 2 else 2), ("repeat", 2)):
            JudgeVote.objects.create(
                judge=judge, comparison=comparison, probe=probe, choice=choice, rationale="A reads"
            )
        JudgeCall.objects.create(
            judge=judge,
            comparison=comparison,
            status="ok",
            http_status=200,
            request={"model": "judge-1", "messages": [{"role": "user", "content": "Compare A and B."}]},
            response='{"verdict": "A better"}',
            latency_s=0.8,
            prompt_tokens=900,
            completion_tokens=40,
        )
    return judge


def _judged_by(user):
    """A judgement of the user's on a campaign of their own, to go back to (the revise page)."""
    from annotate.services.assignments import Verdict, assignment_next, judgement_submit
    from tests.helpers import make_campaign

    campaign = make_campaign(n_comparisons=1, k=1)
    assignment = assignment_next(campaign=campaign, annotator=user)
    return judgement_submit(assignment_id=assignment.pk, annotator=user, verdict=Verdict(choice=2))[0]


def world() -> dict:
    """Rows for every page, and the paths of the pages."""
    admin = UserFactory(username="boss", roles=["admin"])
    campaign, comparisons = voted_campaign([[1, 2, 4], [5, 5, 4], [3, 1, 1], [2, 2, 5]], synthetic=True)
    for n, judgement in enumerate(comparisons[0].judgements.order_by("id"), start=1):  # as the simulator names them
        type(admin).objects.filter(pk=judgement.annotator_id).update(username=f"sim-annotator-{n}")
    snapshot = snapshot_create(
        name="first snapshot",
        campaigns=[campaign],
        seed=0,
        test_fraction=0.5,
        filters=SnapshotFilters(include_synthetic=True),
    )
    built = Built()
    run = make_run(admin)
    bins = [{"low": 0.5 + i / 20, "high": 0.55 + i / 20, "count": 5 + i, "accuracy": 0.5 + i / 20} for i in range(10)]
    model = RewardModel.objects.create(
        name="rm-sim",
        snapshot=snapshot,
        run=run,
        backbone="policy-llama",
        model_dir="/nowhere",
        config={"epochs": 3},
        metrics={
            "test": {
                "n": 40,
                "accuracy": 0.8,
                "ece": 0.04,
                "reliability": bins,
                "by_strength": [{"value": 1, "n": 20, "accuracy": 0.7}],
            },
            "human_agreement": {"pairwise_excluding_ties": 0.73},
        },
    )
    batch = ImportBatch.objects.create(
        filename="agents-2026-03-01.jsonl",
        status="succeeded",
        size_bytes=2048,
        created_count=3,
        error_count=1,
        errors=[{"line": 4, "error": "not JSON"}],
        created_by=admin,
    )
    annotator = UserFactory(username="ann", roles=["annotator"])
    judge = _judge_with_votes(campaign)
    fix = _correction(comparisons[0], annotator)
    revised = _judged_by(admin)
    pages = {
        "home": "/",
        "login": "/login/",
        "tokens": "/account/tokens/",
        "imports": "/annotate/imports/",
        "import": f"/annotate/imports/{batch.pk}/",
        "campaigns": "/annotate/campaigns/",
        "campaign-new": "/annotate/campaigns/new/",
        "campaign": f"/annotate/campaigns/{campaign.pk}/",
        "campaign-edit": f"/annotate/campaigns/{campaign.pk}/edit/",
        "label": f"/annotate/campaigns/{campaign.pk}/label/",
        "quality": f"/annotate/campaigns/{campaign.pk}/quality/",
        "disagreements": f"/annotate/campaigns/{campaign.pk}/disagreements/",
        "comparison": f"/annotate/comparisons/{comparisons[0].pk}/",
        "revise": f"/annotate/judgements/{revised.pk}/revise/",
        "revise-last": f"/annotate/campaigns/{revised.comparison.campaign_id}/revise-last/",
        "corrections": "/annotate/corrections/",
        "correction": f"/annotate/corrections/{fix.pk}/",
        "datasets": "/annotate/datasets/",
        "dataset": f"/annotate/datasets/{snapshot.pk}/",
        "runs": "/runs/",
        "run": f"/runs/{run.pk}/",
        "judges": "/training/judges/",
        "judge": f"/training/judges/{judge.pk}/",
        "policies": "/training/policies/",
        "policy": f"/training/policies/{built.start.pk}/",
        "evaluations": "/training/evaluations/",
        "evaluation": built.url(),
        "evaluation-compare": built.url("compare/"),
        "reward-models": "/reward-models/",
        "reward-model": f"/reward-models/{model.pk}/",
        "margins": f"/reward-models/{model.pk}/campaigns/{campaign.pk}/",
        "users": "/team/users/",
        "user": f"/team/users/{annotator.pk}/",
        "password-link": "/team/password/MQ/bad-token/",
        "password-done": "/team/password/done/",
        "not-found": "/runs/999999/",
    }
    from webapp.runs.kinds import all_kinds

    pages.update({f"launch-{k.name}": f"/runs/new/{k.name}/" for k in all_kinds()})
    return {"run": run, "pages": pages}


def test_the_page_list_covers_every_route():
    """Each HTML route is visited below or is listed as no page, so a new page is not left out."""
    visited = {
        "",
        "login/",
        "account/tokens/",
        "annotate/imports/",
        "annotate/imports/<id:batch_id>/",
        "annotate/campaigns/",
        "annotate/campaigns/new/",
        "annotate/campaigns/<id:campaign_id>/",
        "annotate/campaigns/<id:campaign_id>/edit/",
        "annotate/campaigns/<id:campaign_id>/label/",
        "annotate/campaigns/<id:campaign_id>/quality/",
        "annotate/campaigns/<id:campaign_id>/disagreements/",
        "annotate/comparisons/<id:comparison_id>/",
        "annotate/judgements/<id:judgement_id>/revise/",
        "annotate/campaigns/<id:campaign_id>/revise-last/",
        "annotate/corrections/",
        "annotate/corrections/<id:correction_id>/",
        "annotate/datasets/",
        "annotate/datasets/<id:snapshot_id>/",
        "runs/",
        "runs/new/<slug:kind>/",
        "runs/<id:run_id>/",
        "training/policies/",
        "training/policies/<id:policy_id>/",
        "training/judges/",
        "training/judges/<id:judge_id>/",
        "training/evaluations/",
        "training/evaluations/<id:evaluation_id>/",
        "training/evaluations/<id:evaluation_id>/compare/",
        "reward-models/",
        "reward-models/<id:model_id>/",
        "reward-models/<id:model_id>/campaigns/<id:campaign_id>/",
        "team/users/",
        "team/users/<id:user_id>/",
        "team/password/<uidb64>/<token>/",
        "team/password/done/",
    }
    routes = set(_routes())
    assert routes - visited - set(NOT_PAGES) == set(), "a route is neither visited nor listed as no page"
    assert visited <= routes and set(NOT_PAGES) <= routes


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_fits_the_screen_without_errors(browser, live_server, width):
    rows = world()
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"JS error: {exc}"))
    page.on(
        "console",
        lambda msg: (
            problems.append(f"console {msg.type}: {msg.text}")
            if msg.type == "error" and "status of 404" not in msg.text and "status of 403" not in msg.text
            else None
        ),
    )
    page.on(
        "response",
        lambda r: (
            problems.append(f"{r.status} {r.url}")
            if r.status >= 400 and r.request.resource_type != "document"
            else None
        ),
    )
    login(page, live_server, "boss")
    wide = []
    for name, path in rows["pages"].items():
        response = page.goto(f"{live_server.url}{path}")
        expected = 404 if name == "not-found" else 200
        assert response.status == expected, (name, path, response.status)
        page.wait_for_load_state("load")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        if overflow > 0:
            culprits = page.evaluate("""() => [...document.querySelectorAll('body *')]
                .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
                .slice(0, 4).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))""")
            wide.append(f"{name} ({path}): {overflow}px too wide: {culprits}")
        problems += [f"{name}: {p}" for p in page.evaluate(CHART_PROBLEMS)]
        screenshot(page, f"page-{width}-{name}")
    context.close()
    assert not wide, wide
    assert not problems, problems


def test_the_menu_folds_on_a_phone_and_log_out_is_reachable(browser, live_server):
    world_rows = world()
    context = browser.new_context(viewport={"width": 390, "height": 800})
    page = context.new_page()
    login(page, live_server, "boss")
    page.goto(f"{live_server.url}{world_rows['pages']['runs']}")
    menu = page.get_by_role("button", name="Menu")
    log_out = page.get_by_role("button", name="Log out")
    assert menu.is_visible() and not log_out.is_visible()  # folded: the top bar is one line
    assert page.locator(".topbar").bounding_box()["height"] < 70
    menu.click()
    assert menu.get_attribute("aria-expanded") == "true"
    box = log_out.bounding_box()
    assert log_out.is_visible() and box["x"] >= 0 and box["x"] + box["width"] <= 390
    screenshot(page, "menu-390-open")
    page.get_by_role("link", name="Evaluations").click()
    page.wait_for_url("**/training/evaluations/")
    screenshot(page, "menu-390-followed")
    # On a desktop the links are all in the bar and there is no menu button.
    page.set_viewport_size({"width": 1440, "height": 900})
    assert (
        not page.get_by_role("button", name="Menu").is_visible()
        and page.get_by_role("button", name="Log out").is_visible()
    )
    context.close()


def test_error_pages_use_the_layout_and_say_what_to_do(browser, live_server):
    UserFactory(username="ann", roles=["annotator"])
    context = browser.new_context(viewport={"width": 390, "height": 800})
    page = context.new_page()
    login(page, live_server, "ann")
    response = page.goto(f"{live_server.url}/runs/")
    assert response.status == 403
    text = page.locator("main").inner_text()
    assert "Not allowed" in text and "researcher or admin" in text and "Ask an admin" in text
    assert (
        page.locator(".topbar .brand").is_visible()
        and page.get_by_role("button", name="Log in as someone else").count()
    )
    screenshot(page, "error-403")
    response = page.goto(f"{live_server.url}/annotate/campaigns/424242/")
    assert response.status == 404 and "There is no campaign with this id." in page.locator("main").inner_text()
    page.get_by_role("link", name="Go to the campaigns").click()
    page.wait_for_url("**/annotate/campaigns/")
    screenshot(page, "error-404-followed")
    # The favicon is linked from every page, and /favicon.ico leads to it.
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert page.request.get(f"{live_server.url}{icon}").ok
    assert page.request.get(f"{live_server.url}/favicon.ico").ok
    context.close()
    assert re.search(r"\.svg$", icon)
