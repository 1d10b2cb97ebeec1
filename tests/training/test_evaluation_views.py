"""The before/after dashboards: who may see them, that they show the stored figures, the
side-by-side view and its filter, building a blind human evaluation and reading its win
rate back, the exports and the API agreeing with the page."""

import csv
import io
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from rest_framework.test import APIClient

from annotate.models import Campaign, Comparison, Policy
from annotate.services.assignments import Verdict, assignment_next, judgement_submit
from tests.conftest import api_rows, token_client
from tests.factories import PolicyFactory, TaskFactory, TrajectoryFactory, UserFactory
from tests.helpers import Built, figure, steps
from tests.policy_fixtures import tiny_policy_dir
from training.evaluation.selectors import evaluation_report
from training.evaluation.services import evaluation_execute
from training.models import Evaluation, EvaluationEntry, EvaluationEpisode, HumanEvaluation
from webapp.models import Run
from webapp.templatetags.arbiter import interval

pytestmark = pytest.mark.django_db


@pytest.fixture
def built():
    return Built()


def row_html(page: str, entry_id: int, mode: str) -> str:
    """The table row of one system in one mode."""
    start = page.index(f'id="system-{entry_id}-{mode}"')
    return page[start : page.index("</tr>", start)]


def row_text(page: str, entry_id: int, mode: str) -> str:
    """That row as a reader sees it: no tags, spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", row_html(page, entry_id, mode)).split()).replace("[ ", "[")


# --- Who may see what -------------------------------------------------------------------------

ROUTES = [
    "/training/evaluations/",
    "{url}",
    "{url}compare/",
    "{url}compare/?differ=1&mode=greedy",
    "{url}export.json",
    "{url}export.csv",
]


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_is_for_researchers_and_admins(client, built, role_users, route):
    url = route.format(url=built.url())
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    client.force_login(role_users["annotator"])
    assert client.get(url).status_code == 403
    for role in ("researcher", "admin"):
        client.force_login(role_users[role])
        assert client.get(url).status_code == 200


def test_the_nav_links_evaluations_for_researchers_only(client, role_users):
    client.force_login(role_users["researcher"])
    assert 'href="/training/evaluations/"' in client.get("/").content.decode()
    client.force_login(role_users["annotator"])
    assert 'href="/training/evaluations/"' not in client.get("/").content.decode()


def test_the_list_shows_each_evaluation_with_its_run(client, built, researcher):
    run = Run.objects.create(kind="evaluation", name="eval run", status="succeeded")
    Evaluation.objects.filter(pk=built.evaluation.pk).update(run=run)
    client.force_login(researcher)
    page = client.get("/training/evaluations/").content.decode()
    row = page[page.index(built.url()) : page.index("</tr>", page.index(built.url()))]
    assert "bc vs ppo" in row and "<td>eval</td>" in row and "<td>4</td><td>3</td>" in row
    assert f'href="/runs/{run.pk}/"' in row


# --- The page ---------------------------------------------------------------------------------


def test_the_table_shows_the_stored_figures_per_mode(client, built, researcher):
    client.force_login(researcher)
    page = client.get(built.url()).content.decode()
    start, ppo, bon = (row_text(page, e.pk, "sampled") for e in (built.base, built.ppo, built.bon))
    assert "25.0% [0.0, 50.0]" in start and "0.312 [0.050, 0.600]" in start and "7.50 [6.00, 9.00]" in start
    assert "75.0% [50.0, 100.0]" in ppo and "0.412 [0.100, 0.700]" in ppo and "1.25 [0.50, 2.00]" in ppo
    assert "2.50 [1.50, 3.50]" in ppo and "PPO iteration 2, best by dev" in ppo
    assert "0.900 [0.600, 1.200]" in bon and "0.64 [0.64, 0.64]" in bon and "best-of-4" in bon
    # Greedy figures are a table of their own; best-of-n has none.
    assert "50.0% [0.0, 100.0]" in row_text(page, built.base.pk, "greedy")
    assert "75.0% [25.0, 100.0]" in row_text(page, built.ppo.pk, "greedy")
    assert f'id="system-{built.bon.pk}-greedy"' not in page
    # Paired difference from the episodes: per task PPO - start = 1, 0, 0, 1.
    # The differences are over the evaluation's 4 tasks: too few for an interval, and it says so.
    assert "+50.0 pts (too few for an interval: n = 4)" in ppo and "+0.0 pts (too few for an interval: n = 4)" in bon
    assert f'href="/training/policies/{built.best.pk}/"' in row_html(page, built.ppo.pk, "sampled")
    assert f'href="/training/evaluations/{built.evaluation.pk}/export.csv"' in page


def test_the_curves_show_rm_score_dev_rubric_and_sqrt_kl_with_the_best_checkpoint(client, built, researcher):
    client.force_login(researcher)
    page = client.get(built.url()).content.decode()
    curves = page[page.index('id="curves"') : page.index('id="human-evaluation"')]
    for title in ("Reward-model score", "Dev rubric success (sampled)", "sqrt(KL to the start)"):
        assert f'aria-label="{title}"' in curves
    assert curves.count("<polyline") == 3 and curves.count('class="marker"') == 3
    assert "best by dev rubric: iteration 2" in curves
    assert re.search(r"Over-optimization flagged at iterations?\s+4:", curves)
    assert f'href="/runs/{built.ppo_run.pk}/"' in curves
    assert f'href="/training/policies/{built.last.pk}/">iteration 4</a> (30.0% dev, sampled)' in curves


def test_sqrt_kl_is_the_root_of_the_logged_kl(built):
    (run,) = evaluation_report(built.evaluation)["rl_runs"]
    assert run["curves"]["sqrt_kl"] == [[0, 0.0], [1, 1.0], [2, 2.0], [3, 3.0], [4, 4.0]]
    assert run["curves"]["dev_success"] == [[0, 0.2], [2, 0.4], [4, 0.3]]
    assert run["best_iteration"] == 2 and run["overoptimization"] == [4] and run["reward"] == "reward_model"


def test_ppo_against_the_rubric_is_not_called_a_reward_model_score(client, built, researcher):
    for policy in (built.best, built.last):
        policy.metadata["ppo"]["reward"] = "rubric"
        policy.save()
    client.force_login(researcher)
    curves = client.get(built.url()).content.decode().split('id="curves"')[1]
    assert 'aria-label="Training reward (rubric)"' in curves and "Reward-model score" not in curves


def test_the_policy_page_links_the_evaluations_that_include_it(client, built, researcher):
    client.force_login(researcher)
    assert built.url() in client.get(f"/training/policies/{built.best.pk}/").content.decode()
    assert built.url() not in client.get(f"/training/policies/{built.last.pk}/").content.decode()


# --- Side by side -----------------------------------------------------------------------------


def test_the_compare_page_shows_both_trajectories_per_task_and_filters_to_differences(client, built, researcher):
    client.force_login(researcher)
    page = client.get(built.url(f"compare/?candidate={built.ppo.pk}&mode=sampled")).content.decode()
    assert [f'id="task-{t.pk}"' in page for t in built.tasks] == [True] * 4
    assert page.count('class="pair"') == 4
    assert "base sampled 0 task 0" in page and "ppo sampled 0 task 0" in page  # both sides, sample 0
    assert "sampled 1 task" not in page
    assert "Reference answer: Founder 0" in page and "RM score 0.500" in page and "RM score -0.250" in page

    page = client.get(built.url(f"compare/?candidate={built.ppo.pk}&mode=sampled&differ=1")).content.decode()
    shown = [t.pk for t in built.tasks if f'id="task-{t.pk}"' in page]
    assert shown == [built.tasks[0].pk, built.tasks[3].pk]
    assert "2 of 4 tasks differ in outcome" in page


def test_the_compare_page_opens_on_the_best_checkpoint_and_pages(client, built, researcher, monkeypatch):
    client.force_login(researcher)
    page = client.get(built.url("compare/")).content.decode()
    assert f'<option value="{built.ppo.pk}" selected>' in page
    monkeypatch.setattr("training.evaluation.selectors.PAIRS_PER_PAGE", 3)
    second = client.get(built.url(f"compare/?candidate={built.ppo.pk}&page=2")).content.decode()
    assert [f'id="task-{t.pk}"' in second for t in built.tasks] == [False, False, False, True]
    assert "page 2 of 2" in second


def test_bad_compare_input_is_a_clear_400(client, built, researcher):
    client.force_login(researcher)
    response = client.get(built.url(f"compare/?candidate={built.base.pk}"))
    assert response.status_code == 400 and "No such system in this evaluation." in response.content.decode()
    response = client.get(built.url("compare/?mode=beam"))
    assert response.status_code == 400 and "mode" in response.content.decode()


# --- Human evaluation -------------------------------------------------------------------------


def vote_for_candidate(campaign, candidate_ids: set[int], annotator, *, tie_on: int | None = None) -> int:
    """Judge every comparison an annotator is given: the candidate's side much better (or a tie on
    the comparison of task `tie_on`). Works out the candidate's side on screen from the assignment."""
    made = 0
    while (assignment := assignment_next(campaign=campaign, annotator=annotator)) is not None:
        comparison = assignment.comparison
        candidate_is_a = comparison.trajectory_a_id in candidate_ids
        candidate_left = candidate_is_a == assignment.left_is_a
        choice = 3 if comparison.task_id == tie_on else (1 if candidate_left else 5)
        judgement_submit(assignment_id=assignment.id, annotator=annotator, verdict=Verdict(choice=choice))
        made += 1
    return made


def test_an_admin_builds_a_blind_campaign_and_the_win_rate_comes_back(client, built, admin_user):
    client.force_login(admin_user)
    response = client.post(built.url(), {"candidate": built.ppo.pk, "mode": "sampled", "votes_per_comparison": 2})
    assert response.status_code == 302 and response["Location"] == built.url()
    human = HumanEvaluation.objects.get()
    assert (human.baseline, human.candidate, human.mode, human.identical_pairs) == (built.base, built.ppo, "sampled", 1)
    campaign = human.campaign
    assert campaign.votes_per_comparison == 2 and campaign.created_by == admin_user
    # One comparison per task but the identical one: the start's sample 0 against the PPO's sample 0.
    pairs = {c.task_id: {c.trajectory_a_id, c.trajectory_b_id} for c in Comparison.objects.filter(campaign=campaign)}
    assert pairs == {
        built.tasks[i].pk: {built.sample0[("base", i)].pk, built.sample0[("ppo", i)].pk} for i in (0, 1, 3)
    }
    page = client.get(built.url()).content.decode()
    assert "built with 3 comparisons (1 identical pairs left out)" in page
    section = page[page.index('id="human-evaluations"') :]
    assert f'href="/annotate/campaigns/{campaign.pk}/quality/"' in section and "no votes yet" in section

    # Blind: what an annotator sees (the home page, the campaign list, the comparison) names no system.
    assert campaign.name == f"Blind evaluation {built.evaluation.pk}-1"
    watcher = UserFactory(roles=["annotator"])
    client.force_login(watcher)
    for url in ("/", "/annotate/campaigns/", f"/annotate/campaigns/{campaign.pk}/label/"):
        shown = client.get(url).content.decode()
        assert "Blind evaluation" in shown, url
        for name in (built.base.label, built.ppo.label, "ppo-run", "(start)"):
            assert name not in shown, (url, name)
    client.force_login(admin_user)

    candidate_ids = {built.sample0[("ppo", i)].pk for i in range(4)}
    assert vote_for_candidate(campaign, candidate_ids, watcher) == 3
    assert vote_for_candidate(campaign, candidate_ids, UserFactory(roles=["annotator"]), tie_on=built.tasks[3].pk) == 3
    section = client.get(built.url()).content.decode().split('id="human-evaluations"')[1]
    # Per comparison 1, 1 and (1 + 1/2) / 2: 91.7%. Task 3's candidate is trajectory A (the lower id).
    assert '91.7% <span class="ci too-few">(too few for an interval: n = 3)' in section
    assert "5 wins, 1 ties, 0 losses" in section
    assert "3 of 3 judged" in section
    assert "no votes yet" not in section


def test_a_system_is_judged_against_another_one_and_read_from_the_candidates_side(client, built, admin_user):
    client.force_login(admin_user)
    data = {"candidate": built.ppo.pk, "against": built.bon.pk, "mode": "sampled", "votes_per_comparison": 1}
    assert client.post(built.url(), data).status_code == 302
    human = HumanEvaluation.objects.get()
    assert (human.baseline, human.candidate) == (built.bon, built.ppo) and human.identical_pairs == 1
    candidate_ids = {built.sample0[("ppo", i)].pk for i in range(4)}
    assert vote_for_candidate(human.campaign, candidate_ids, UserFactory(roles=["annotator"])) == 3
    section = client.get(built.url()).content.decode().split('id="human-evaluations"')[1]
    assert 'PPO best by dev <span class="muted">against</span> best-of-4 over bc@1' in section
    assert '100.0% <span class="ci too-few">(too few for an interval: n = 3)' in section
    assert "3 wins, 0 ties, 0 losses" in section
    same = {"candidate": built.ppo.pk, "against": built.ppo.pk, "mode": "sampled", "votes_per_comparison": 1}
    response = client.post(built.url(), same)
    assert response.status_code == 400 and "Choose a system other than the candidate." in response.content.decode()
    other = Evaluation.objects.create(name="other", split="eval", reference_policy=built.start)
    foreign = EvaluationEntry.objects.create(evaluation=other, label="x", policy=built.start, position=0)
    response = client.post(built.url(), {**same, "against": foreign.pk})
    assert response.status_code == 400 and "No such system in this evaluation." in response.content.decode()
    assert HumanEvaluation.objects.count() == 1


def test_head_to_head_pairs_every_system_but_the_start_on_the_same_tasks(client, built, researcher):
    report = evaluation_report(built.evaluation)
    methods = {s["label"]: s["method"] for s in report["systems"]}
    assert methods == {"bc@1 (start)": "start", "best-of-4 over bc@1": "best-of-4", "PPO best by dev": "PPO"}
    (row,) = [h for h in report["head_to_head"] if h["mode"] == "sampled"]
    assert (row["a"]["label"], row["b"]["label"]) == ("best-of-4 over bc@1", "PPO best by dev")
    # Per task, PPO against best-of-4 (the start's sample 0): +1, 0, 0, +1, a mean of +0.5.
    assert row["difference"]["mean"] == pytest.approx(0.5) and row["winner"] in ("", "PPO best by dev")
    assert not [h for h in report["head_to_head"] if h["mode"] == "greedy"]  # best-of-4 has no greedy episodes
    client.force_login(researcher)
    section = client.get(built.url()).content.decode().split('id="head-to-head"')[1].split("</section>")[0]
    # The row names the policy; its badge says best-of-4, once (issue 53: "best-of-4 over bc@1 best-of-4").
    assert 'bc@1 <span class="tag">best-of-4</span>' in section and "best-of-4 over" not in section
    assert "PPO best by dev" in section and "+50.0" in section


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"mode": "sampled", "votes_per_comparison": 3}, "This field is required"),
        (
            {"candidate": "{base}", "mode": "sampled", "votes_per_comparison": 3},
            "Choose a system of this evaluation other than its baseline.",
        ),
        ({"candidate": "{ppo}", "mode": "beam", "votes_per_comparison": 3}, "Select a valid choice"),
        ({"candidate": "{ppo}", "mode": "sampled", "votes_per_comparison": 0}, "greater than or equal to 1"),
        ({"candidate": "{ppo}", "mode": "sampled", "votes_per_comparison": 21}, "less than or equal to 20"),
        (
            {"candidate": "{bon}", "mode": "sampled", "votes_per_comparison": 3},
            "did exactly what the baseline did on every task",
        ),
        (
            {"candidate": "{bon}", "mode": "greedy", "votes_per_comparison": 3},
            "best-of-4 over bc@1 has no greedy episodes",
        ),
    ],
)
def test_bad_human_evaluation_input_is_refused_and_creates_nothing(client, built, admin_user, data, message):
    client.force_login(admin_user)
    ids = {"base": built.base.pk, "ppo": built.ppo.pk, "bon": built.bon.pk}
    response = client.post(built.url(), {k: str(v).format(**ids) for k, v in data.items()})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not HumanEvaluation.objects.exists() and not Campaign.objects.exists()


def test_the_same_human_evaluation_twice_is_refused(client, built, admin_user):
    client.force_login(admin_user)
    data = {"candidate": built.ppo.pk, "mode": "greedy", "votes_per_comparison": 3}
    assert client.post(built.url(), data).status_code == 302
    response = client.post(built.url(), data)
    assert response.status_code == 400 and "exists already" in response.content.decode()
    assert HumanEvaluation.objects.count() == 1


def test_only_admins_build_human_evaluations(client, built, role_users):
    data = {"candidate": built.ppo.pk, "mode": "sampled", "votes_per_comparison": 3}
    assert client.post(built.url(), data).status_code == 302  # anonymous: to the login page
    for role in ("annotator", "researcher"):
        client.force_login(role_users[role])
        assert client.post(built.url(), data).status_code == 403
    assert not Campaign.objects.exists()
    client.force_login(role_users["researcher"])
    assert 'id="human-evaluation-form"' not in client.get(built.url()).content.decode()
    client.force_login(role_users["admin"])
    assert 'id="human-evaluation-form"' in client.get(built.url()).content.decode()


# --- Exports and API --------------------------------------------------------------------------

STYLES = {
    "success": "percent",
    "f1": "3",
    "quote_support": "3",
    "rm_score": "3",
    "steps": "2",
    "tool_errors": "2",
    "kl": "2",
    "success_vs_baseline": "points",
}


def test_the_csv_and_json_exports_agree_with_the_page(client, built, researcher):
    client.force_login(researcher)
    page = client.get(built.url()).content.decode()
    response = client.get(built.url("export.csv"))
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == f'attachment; filename="arbiter-evaluation-{built.evaluation.pk}.csv"'
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 4 + 1 + 3 + 4 + 1 + 2 + 1  # start 4+1, best-of-4 3+1, PPO 4+1+1+1
    for row in rows:
        value = {k: float(row[k]) for k in ("mean", "low", "high")}
        if row["tasks"]:  # the units the interval is over: below 10 the page shows none
            value["tasks"] = int(row["tasks"])
        assert interval(value, STYLES[row["metric"]]) in row_html(page, int(row["entry_id"]), row["mode"])
    ppo_success = next(
        r for r in rows if r["system"] == "PPO best by dev" and r["metric"] == "success" and r["mode"] == "sampled"
    )
    assert (ppo_success["mean"], ppo_success["tasks"], ppo_success["episodes"]) == ("0.75", "40", "80")

    response = client.get(built.url("export.json"))
    assert response["Content-Disposition"] == f'attachment; filename="arbiter-evaluation-{built.evaluation.pk}.json"'
    report = response.json()
    by_label = {s["label"]: s for s in report["systems"]}
    for row in rows:
        system = by_label[row["system"]]
        found = (
            system["success_vs_baseline"][row["mode"]]
            if row["metric"] == "success_vs_baseline"
            else system["metrics"][row["mode"]][row["metric"]]
        )
        assert [float(row[k]) for k in ("mean", "low", "high")] == pytest.approx(
            [found[k] for k in ("mean", "low", "high")]
        )
    assert report["config"]["best_of_n"] == [4] and report["baseline_id"] == built.base.pk
    assert report["rl_runs"][0]["best_iteration"] == 2
    assert client.get(built.url("export.xml")).status_code == 404


def test_the_api_lists_evaluations_and_returns_the_report(built, role_users):
    api = token_client(role_users["researcher"])
    listed = api_rows(api, "/api/v1/evaluations/")
    assert listed == [
        {
            "id": built.evaluation.pk,
            "name": "bc vs ppo",
            "split": "eval",
            "tasks": 4,
            "systems": 3,
            "run_id": None,
            "reference_policy_id": built.start.pk,
            "created_at": listed[0]["created_at"],
        }
    ]
    detail = api.get(f"/api/v1/evaluations/{built.evaluation.pk}/")
    assert detail.status_code == 200
    web = Client()
    web.force_login(role_users["researcher"])
    assert detail.json() == web.get(built.url("export.json")).json()
    assert token_client(role_users["admin"]).get(f"/api/v1/evaluations/{built.evaluation.pk}/").status_code == 200
    assert token_client(role_users["annotator"]).get("/api/v1/evaluations/").status_code == 403
    assert token_client(role_users["annotator"]).get(f"/api/v1/evaluations/{built.evaluation.pk}/").status_code == 403
    assert APIClient().get("/api/v1/evaluations/").status_code in (401, 403)
    assert api.get("/api/v1/evaluations/999999/").status_code == 404


# --- From a real evaluation -------------------------------------------------------------------


def test_a_played_evaluation_renders_and_its_human_evaluation_pairs_sample_zero(client, admin_user):
    """The tiny untrained policy against a wider one on 3 eval tasks, through evaluation_execute."""
    policies = Path(settings.VAR_DIR) / "policies"
    start = Policy.objects.create(
        name="tiny", version="1", model_dir=str(tiny_policy_dir(policies / "tiny-test-policy"))
    )
    other = Policy.objects.create(
        name="tiny-wide", version="1", model_dir=str(tiny_policy_dir(policies / "tiny-wide-policy", hidden=48))
    )
    evaluation = evaluation_execute(
        name="tiny before/after", baseline=start, others=[("wide", other)], n_tasks=3, samples=2, greedy=False
    )
    base, wide = evaluation.entries.order_by("position")
    client.force_login(admin_user)
    url = f"/training/evaluations/{evaluation.pk}/"
    page = client.get(url).content.decode()
    success = wide.metrics["sampled"]["success"]
    assert interval(success, "percent") in row_html(page, wide.pk, "sampled")
    assert interval(wide.metrics["sampled"]["kl"], "2") in row_html(page, wide.pk, "sampled")

    page = client.get(f"{url}compare/?candidate={wide.pk}").content.decode()
    assert page.count('class="pair"') == 3

    assert client.post(url, {"candidate": wide.pk, "mode": "sampled", "votes_per_comparison": 1}).status_code == 302
    human = HumanEvaluation.objects.get(evaluation=evaluation)
    sample0 = {
        (e.entry_id, e.task_id): e.trajectory_id
        for e in EvaluationEpisode.objects.filter(entry__evaluation=evaluation, mode="sampled", sample=0)
    }
    comparisons = Comparison.objects.filter(campaign=human.campaign)
    assert comparisons.count() + human.identical_pairs == 3
    for c in comparisons:
        assert {c.trajectory_a_id, c.trajectory_b_id} == {sample0[(base.pk, c.task_id)], sample0[(wide.pk, c.task_id)]}


def test_the_chosen_checkpoint_shows_its_dev_interval(client, built, researcher):
    built.best.metadata["ppo"]["dev"] = {
        "success": 0.4,
        "success_low": 0.31,
        "success_high": 0.5,
        "episodes": 90,
        "greedy_success": 0.5,
        "greedy_low": 0.36,
        "greedy_high": 0.64,
    }
    built.best.save()
    client.force_login(researcher)
    curves = client.get(built.url()).content.decode().split('id="curves"')[1]
    assert '<span class="best-dev-interval">40.0% [31.0%, 50.0%]</span> over 90 episodes' in curves
    assert "greedy 50.0% [36.0%, 64.0%]" in curves
    (run,) = evaluation_report(built.evaluation)["rl_runs"]
    assert run["best_dev"]["low"] == 0.31 and run["best_dev"]["episodes"] == 90


def test_the_empty_evaluations_page_says_how_to_make_one(client, role_users):
    client.force_login(role_users["admin"])
    page = client.get("/training/evaluations/").content.decode()
    assert "No evaluations yet" in page and 'href="/runs/new/evaluation/"' in page
    assert "python manage.py run_pipeline" in page and "POST /api/v1/runs/" in page
    client.force_login(role_users["researcher"])
    page = client.get("/training/evaluations/").content.decode()
    assert "an admin launches an evaluation run" in page and 'href="/runs/new/evaluation/"' not in page


@pytest.mark.parametrize("rm_last", [0.2, 0.9])
def test_the_last_checkpoint_is_shown_beside_the_chosen_one_and_a_collapse_is_flagged(client, researcher, rm_last):
    start = PolicyFactory(name="bc", version="1")
    run = Run.objects.create(
        kind="ppo",
        name="ppo that fell",
        status="succeeded",
        summary={
            "stop_reason": "collapse",
            "message": "Stopped after iteration 10: dev success fell to 5.0% from the start's 45.0%.",
        },
    )
    chosen = PolicyFactory(
        name="ppo-fell",
        version="iter-0000",
        parent=start,
        run=run,
        metadata={"ppo": {"iteration": 0, "run_id": run.pk, "best": True, "dev": {"success": 0.45}}},
    )
    last = PolicyFactory(
        name="ppo-fell",
        version="iter-0010",
        parent=start,
        run=run,
        metadata={
            "ppo": {"iteration": 10, "run_id": run.pk, "best": False, "dev": {"success": 0.05, "collapsed": True}}
        },
    )
    evaluation = Evaluation.objects.create(
        name="fell",
        split="eval",
        reference_policy=start,
        config={
            "split": "eval",
            "tasks": 4,
            "samples": 1,
            "temperature": 1.0,
            "greedy": False,
            "best_of_n": [],
            "seed": 0,
        },
    )
    entries, tasks = {}, [TaskFactory(prompt=f"Who founded glassworks {i}?") for i in range(4)]
    for position, (policy, label, correct) in enumerate(
        ((start, "bc@1 (start)", True), (chosen, "PPO best by dev", True), (last, "PPO last", False))
    ):
        entries[label] = EvaluationEntry.objects.create(
            evaluation=evaluation,
            label=label,
            policy=policy,
            is_baseline=policy == start,
            position=position,
            metrics={
                "sampled": {
                    "success": figure(float(correct), float(correct), float(correct)),
                    "rm_score": figure(*[rm_last if label == "PPO last" else 0.5] * 3),
                }
            },
        )
        for i, task in enumerate(tasks):
            trajectory = TrajectoryFactory(
                task=task, policy=policy, steps=steps(f"{label} {i}"), outcome={"correct": correct, "steps": 2}
            )
            EvaluationEpisode.objects.create(
                entry=entries[label], task=task, trajectory=trajectory, mode="sampled", sample=0, correct=correct
            )
    client.force_login(researcher)
    page = client.get(f"/training/evaluations/{evaluation.pk}/").content.decode()
    fell, kept = entries["PPO last"], entries["PPO best by dev"]
    assert "iteration 10, last" in row_text(page, fell.pk, "sampled") and "collapse" in row_text(
        page, fell.pk, "sampled"
    )
    assert "best by dev" in row_text(page, kept.pk, "sampled") and "collapse" not in row_text(page, kept.pk, "sampled")
    assert f'id="collapse-{fell.pk}"' in page and f'id="collapse-{kept.pk}"' not in page
    assert "the run's last checkpoint collapsed" in page and "dev success fell to 5.0%" in page
    # The note says what the numbers beside it say: reward hacking only where the reward rose.
    note = re.sub(r"\s+", " ", page[page.index(f'id="collapse-{fell.pk}"') :].split("</p>")[0])
    if rm_last > 0.5:
        assert "score rose above the start's while its success fell: it exploited its reward" in note
    else:
        assert "fell too, so this is not reward hacking" in note and "exploited" not in note
    report = evaluation_report(evaluation)
    systems = {s["label"]: s for s in report["systems"]}
    assert systems["PPO last"]["collapsed"] and systems["PPO last"]["ppo"]["last"]
    assert not systems["PPO best by dev"]["collapsed"] and not systems["PPO best by dev"]["ppo"]["last"]
    assert report["rl_runs"][0]["stop_reason"] == "collapse"


def test_the_start_at_its_best_temperature_on_dev_is_a_row_of_its_own(tmp_path, researcher):
    """A start that reads greedily and derails at T=1 (the known-optimum environment's cloned
    start): its best temperature is chosen on dev tasks, then played on the evaluated tasks."""
    from training.rl.sanity import SanityConfig, bc_start

    start = Policy.objects.create(
        name="codeword-start", version="1", model_dir=str(bc_start(tmp_path / "start", SanityConfig()))
    )
    evaluation = evaluation_execute(
        name="temperature",
        baseline=start,
        others=[],
        environment="codeword",
        n_tasks=40,
        samples=1,
        greedy=False,
        temperatures=[0.3],
    )
    chosen = evaluation.config["best_temperature"]
    assert chosen["chosen_on"] == "dev" and chosen["environment"] == "codeword"
    # Greedy is offered too, and every candidate plays the same 300 dev tasks (not the evaluation's 40).
    candidates = {c["temperature"]: c for c in chosen["candidates"]}
    assert set(candidates) == {0.0, 0.3, 1.0} and chosen["tasks"] == 300
    assert all(c["n"] == 300 and c["low"] <= c["success"] <= c["high"] for c in candidates.values())
    assert chosen["chosen"] == max(candidates, key=lambda t: (candidates[t]["success"], t))
    assert candidates[chosen["chosen"]]["success"] > candidates[1.0]["success"]
    base, tuned = evaluation.entries.order_by("position")
    words = "T=0 (greedy)" if chosen["chosen"] == 0 else f"T={chosen['chosen']:g}"
    assert tuned.label == f"{start} (start) at {words}, best on dev" and tuned.policy == start
    assert tuned.metrics["sampled"]["success"]["mean"] > base.metrics["sampled"]["success"]["mean"]
    report = evaluation_report(evaluation)
    methods = {s["label"]: s["method"] for s in report["systems"]}
    assert methods[tuned.label] == "start at its best T" and methods[base.label] == "start"


def test_every_policy_also_plays_the_world_it_trained_on_so_memorisation_shows_as_a_gap(client, researcher):
    """Issue 43: an evaluation on an unseen world also plays each policy on held-out tasks of
    the world it trained on (sampled and greedy); the page shows both worlds and each change
    from the start side by side, and only the evaluation's own episodes are stored."""
    policies = Path(settings.VAR_DIR) / "policies"
    start = Policy.objects.create(name="tiny", version="1", model_dir=str(tiny_policy_dir(policies / "tiny-seen")))
    other = Policy.objects.create(
        name="tiny-wide", version="1", model_dir=str(tiny_policy_dir(policies / "tiny-seen-wide", hidden=48))
    )
    evaluation = evaluation_execute(
        name="two worlds",
        baseline=start,
        others=[("wide", other)],
        environment="encyclopedia-unseen",
        n_tasks=3,
        samples=1,
        seen_environment="encyclopedia",
        seen_tasks=2,
    )
    assert evaluation.config["seen_environment"] == "encyclopedia" and evaluation.config["seen_tasks"] == 2
    base, wide = evaluation.entries.order_by("position")
    for entry in (base, wide):
        assert entry.metrics["seen_sampled"]["success"]["tasks"] == 2
        assert entry.metrics["seen_greedy"]["success"]["episodes"] == 2
        assert entry.metrics["sampled"]["success"]["tasks"] == 3
    assert not EvaluationEpisode.objects.filter(entry__evaluation=evaluation).exclude(mode__in=["sampled", "greedy"])
    rows = evaluation_report(evaluation)["memorisation"]
    assert [r["id"] for r in rows] == [base.pk, wide.pk]
    sampled = rows[1]["modes"][0]
    expected = 100 * (wide.metrics["seen_sampled"]["success"]["mean"] - base.metrics["seen_sampled"]["success"]["mean"])
    assert sampled["mode"] == "sampled" and sampled["gain_seen"] == pytest.approx(expected)
    client.force_login(researcher)
    page = client.get(f"/training/evaluations/{evaluation.pk}/").content.decode()
    section = page.split('id="memorisation"')[1].split("</section>")[0]
    assert "Seen (encyclopedia)" in section and "Unseen (encyclopedia-unseen)" in section
    assert f'id="memorisation-{wide.pk}"' in section and "memorisation" in section
    # The run kind takes it too, checked like the evaluation's own environment.
    from training.run_kinds.improve import EvaluationRunConfig, _evaluation_check

    bad = EvaluationRunConfig(baseline_policy_id=start.pk, seen_environment="nowhere", best_of_n="")
    assert any(p.startswith("seen_environment:") for p in _evaluation_check(bad))
