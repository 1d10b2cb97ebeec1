"""What changed in behaviour (issue 54): per habit situation, each system's share of tasks handled
right with its Wilson interval and the paired difference from the start; where two episodes of
a task first part; the side-by-side view kept to one situation; the API's `behaviour`."""

import random
import re

import pytest
from django.test import Client

from annotate.trajectory_view import pair_view
from core.intervals import share_interval
from tests.conftest import token_client
from tests.factories import PolicyFactory
from tests.helpers import Built
from tests.training.behaviour_fixtures import one_hop_early, stored_evaluation, two_hops
from training.evaluation.behaviour import NO_SITUATIONS, evaluation_behaviour
from training.evaluation.divergence import first_divergence, step_words
from training.evaluation.selectors import _method, evaluation_report
from training.models import EvaluationEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored():
    return stored_evaluation()


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def by_name(behaviour: dict) -> dict:
    return {s["name"]: {r["label"]: r for r in s["systems"]} for s in behaviour["situations"]}


# --- The figures ------------------------------------------------------------------------------


def test_each_situation_has_each_systems_share_with_its_wilson_interval_and_the_paired_difference(stored):
    behaviour = evaluation_report(stored.evaluation)["behaviour"]
    assert behaviour["grouped_by"] == "situation" and behaviour["modes"] == ["sampled", "greedy"]
    # The habits' situations in their own order; a task that names only its question type is
    # grouped by it.
    assert [s["name"] for s in behaviour["situations"]] == [
        "decoy_on_top",
        "headquarters_first_page",
        "birthplace",
    ]
    assert [s["tasks"] for s in behaviour["situations"]] == [4, 3, 2]
    assert "opens the top result" in behaviour["situations"][0]["habit"]
    employer = by_name(behaviour)["decoy_on_top"]
    start, result = employer["bc-habits@1 (start)"], employer["bc-filtered@1"]
    # The start never escapes its habit; the result: per task 1/2, 2/2, 0/2, 2/2, a mean of 0.625
    # over 4 tasks (each task's samples averaged first), its Wilson interval over those 4.
    assert start["figures"]["sampled"]["mean"] == 0 and start["figures"]["sampled"]["n"] == 4
    assert (start["figures"]["sampled"]["low"], start["figures"]["sampled"]["high"]) == share_interval(0, 4)
    sampled = result["figures"]["sampled"]
    assert sampled["mean"] == pytest.approx(0.625) and (sampled["n"], sampled["episodes"]) == (4, 8)
    assert (sampled["low"], sampled["high"]) == pytest.approx(share_interval(2.5, 4))
    assert result["figures"]["greedy"]["mean"] == pytest.approx(0.75)
    # Paired by task against the start: +0.5, +1, 0, +1.
    assert result["vs_baseline"]["sampled"]["mean"] == pytest.approx(0.625)
    assert result["vs_baseline"]["sampled"]["tasks"] == 4
    assert result["vs_baseline"]["greedy"]["mean"] == pytest.approx(0.75)
    assert start["vs_baseline"] == {}
    birthplace = by_name(behaviour)["birthplace"]
    assert birthplace["bc-filtered@1"]["vs_baseline"]["sampled"]["mean"] == pytest.approx(0.25)
    headquarters = by_name(behaviour)["headquarters_first_page"]
    assert headquarters["bc-filtered@1"]["vs_baseline"]["sampled"]["mean"] == 0


def test_the_words_say_what_each_figure_is_and_the_rows_say_how_they_were_made(stored):
    behaviour = evaluation_report(stored.evaluation)["behaviour"]
    employer = by_name(behaviour)["decoy_on_top"]
    start = employer["bc-habits@1 (start)"]
    assert start["figures"]["sampled"]["words"] == "sampled at T=1, 2 episodes per task"
    assert start["figures"]["greedy"]["words"] == "greedy, one episode per task"
    best_t = employer["bc-habits@1 (start) at T=0.5, best on dev"]
    assert best_t["figures"]["sampled"]["words"] == "sampled at T=0.5, 2 episodes per task"
    assert "greedy" not in best_t["figures"]
    methods = {r["label"]: r["method"] for r in employer.values()}
    assert methods == {
        "bc-habits@1 (start)": "start",
        "bc-filtered@1": "behaviour cloning, successful demonstrations only (filtered)",
        "bc-habits@1 (start) at T=0.5, best on dev": "start at its best T",
    }


def test_a_start_whose_best_temperature_is_greedy_says_greedy_not_t_0(stored):
    stored.evaluation.config["best_temperature"]["chosen"] = 0.0
    stored.evaluation.save()
    employer = by_name(evaluation_report(stored.evaluation)["behaviour"])["decoy_on_top"]
    best_t = employer["bc-habits@1 (start) at T=0.5, best on dev"]
    assert best_t["figures"]["sampled"]["words"] == "greedy, one episode per task"


@pytest.mark.parametrize(
    ("config", "method"),
    [
        ({"demonstrator": "clean"}, "behaviour cloning, on a clean demonstrator (no habits, no slips)"),
        ({"demonstrator": "random"}, "behaviour cloning, on a demonstrator with random slips only (no habits)"),
        (
            {"demonstrator": "random", "demonstrations": "successful"},
            "behaviour cloning, on a demonstrator with random slips only (no habits), "
            "successful demonstrations only (filtered)",
        ),
        ({"demonstrator": "habits", "demonstrations": "all"}, "behaviour cloning"),
    ],
)
def test_a_behaviour_cloning_baseline_says_what_it_imitated(stored, config, method):
    policy = PolicyFactory(metadata={"bc": {"steps": 3}, "config": config})
    entry = EvaluationEntry.objects.create(evaluation=stored.evaluation, label="bc", policy=policy, position=9)
    assert _method(entry, stored.start.policy_id) == method


def test_the_figures_take_one_query_whatever_the_number_of_tasks(stored, django_assert_num_queries):
    systems = evaluation_report(stored.evaluation)["systems"]
    with django_assert_num_queries(1):
        evaluation_behaviour(stored.evaluation, systems=systems)


def test_an_environment_that_names_no_situations_gets_a_sentence_and_nothing_else(client, researcher):
    built = Built()  # its tasks carry no metadata
    behaviour = evaluation_report(built.evaluation)["behaviour"]
    assert behaviour == {"grouped_by": None, "note": NO_SITUATIONS, "modes": [], "situations": []}
    client.force_login(researcher)
    page = client.get(built.url()).content.decode()
    section = page[page.index('id="behaviour"') : page.index("</section>", page.index('id="behaviour"'))]
    assert "names no situations" in section and "<table" not in section
    compare = client.get(built.url("compare/")).content.decode()
    assert 'name="situation"' not in compare


# --- Where two episodes part ------------------------------------------------------------------


def test_divergence_of_the_same_steps_is_none_even_with_keys_reordered():
    left = [{"kind": "action", "tool": "open", "arguments": {"index": 0, "page": "a"}}]
    right = [{"kind": "action", "tool": "open", "arguments": {"page": "a", "index": 0}}]
    assert first_divergence(left, right) is None
    assert first_divergence(one_hop_early("X"), one_hop_early("X")) is None


def test_divergence_is_the_first_step_that_differs():
    assert first_divergence(one_hop_early("X"), two_hops("X")) == 4  # the answer, against a second search
    assert first_divergence(one_hop_early("X"), one_hop_early("Y")) == 0
    assert step_words(two_hops("X"), 4) == "search(Acme Glassworks)"
    assert step_words(one_hop_early("X"), 4) == "answer “Acme Glassworks”"


def test_divergence_where_one_episode_is_the_others_beginning_is_where_the_shorter_ends():
    longer = two_hops("X")
    assert first_divergence(longer[:5], longer) == 5
    assert first_divergence(longer, longer[:5]) == 5
    assert step_words(longer[:5], 5) == "no step: the episode had ended"
    assert first_divergence([], longer) == 0


def test_the_divergence_and_the_aligned_rows_mark_the_same_step_on_any_pair():
    """One notion of "first difference": the evaluation's divergence and the side-by-side rows'
    mark (content alignment, and index alignment past its size limit) agree on random pairs."""
    rng = random.Random(54)
    pool = two_hops("X") + one_hop_early("Y")
    for _ in range(300):
        left = [rng.choice(pool) for _ in range(rng.randint(0, 6))]
        right = left[: rng.randint(0, len(left))] + [rng.choice(pool) for _ in range(rng.randint(0, 4))]
        for max_cells in (10_000, 0):
            assert pair_view(left, right, max_cells=max_cells).first_difference == first_divergence(left, right)


# --- The pages --------------------------------------------------------------------------------


def test_the_evaluation_page_shows_the_panel_with_links_to_each_situation(client, researcher, stored):
    client.force_login(researcher)
    page = client.get(stored.url()).content.decode()
    section = page[page.index('id="behaviour"') : page.index("</section>", page.index('id="behaviour"'))]
    assert "What changed in behaviour" in section
    assert "Handled right, sampled at T=1, 2 episodes per task" in section
    assert "Handled right, greedy, one episode per task" in section
    employer = section[section.index('id="situation-decoy_on_top"') : section.index("</tbody>")]
    words = text(employer)
    low, high = share_interval(2.5, 4)
    assert f"62.5% [{100 * low:.1f}%, {100 * high:.1f}%] n = 4" in words
    assert "+62.5 pts (too few for an interval: n = 4)" in words
    assert "sampled at T=0.5, 2 episodes per task" in words  # the best-temperature row says so
    assert "behaviour cloning, successful demonstrations only (filtered)" in words
    assert "opens the top result, the namesake" in words
    link = (
        f'href="/training/evaluations/{stored.evaluation.pk}/compare/?candidate={stored.result.pk}'
        '&amp;mode=greedy&amp;situation=decoy_on_top&amp;differ=1"'
    )
    assert link in employer
    # The best-temperature row has no greedy episodes: its link opens its sampled ones.
    assert f"candidate={stored.best_t.pk}&amp;mode=sampled&amp;situation=decoy_on_top" in employer


def test_the_side_by_side_view_keeps_one_situation_and_marks_the_first_difference(client, researcher, stored):
    client.force_login(researcher)
    url = stored.url(f"compare/?candidate={stored.result.pk}&mode=greedy&situation=decoy_on_top")
    page = client.get(url).content.decode()
    shown = set(re.findall(r'id="task-(\d+)"', page))
    assert shown == {str(t.pk) for t in stored.tasks["decoy_on_top"]}
    assert "situation <code>decoy_on_top</code>" in page
    assert '<option value="decoy_on_top" selected>' in page
    # Greedy, the result walks on to the founder on tasks 0, 1 and 3: both sides say where they part.
    pair = page[page.index(f'id="task-{stored.tasks["decoy_on_top"][0].pk}"') :].split("</section>")[0]
    marks = re.findall(r'<p class="first-divergence">([^<]*)</p>', pair)
    assert marks == [
        "first difference: step 4, answer “Acme Glassworks”",
        "first difference: step 4, search(Acme Glassworks)",
    ]
    # The aligned steps below mark the same place: the result's step 4, which the start has no
    # counterpart for (its answer lines up with the result's answer, further down).
    assert len(re.findall(r'class="pair-row row-[a-z-]+ first-diff"', pair)) == 1
    assert "first difference: bc-habits@1 (start) no step · bc-filtered@1 step 4" in text(pair)
    # Task 2: the same steps on both sides, no mark.
    same = page[page.index(f'id="task-{stored.tasks["decoy_on_top"][2].pk}"') :].split("</section>")[0]
    assert "first-divergence" not in same and "took the same steps" in same
    differ = client.get(url + "&differ=1").content.decode()
    assert "3 of 4 tasks differ in outcome" in differ
    everything = client.get(stored.url(f"compare/?candidate={stored.result.pk}&mode=greedy")).content.decode()
    assert len(re.findall(r'id="task-\d+"', everything)) == 9


@pytest.mark.parametrize("value", ["no_such_situation", "a\x00b", "' OR 1=1 --", "x" * 5000])
def test_a_bad_situation_is_a_400_that_names_the_situations_never_a_500(client, researcher, stored, value):
    client.force_login(researcher)
    response = client.get(stored.url("compare/"), {"candidate": stored.result.pk, "situation": value})
    assert response.status_code == 400
    page = response.content.decode()
    assert "no task of this evaluation is in that situation" in page.lower()
    assert "decoy_on_top, headquarters_first_page, birthplace" in page
    assert 'class="task-pair"' not in page


# --- The API ----------------------------------------------------------------------------------


def test_the_api_has_the_same_behaviour_figures_and_keeps_one_situation_on_request(researcher, stored):
    api = token_client(researcher)
    detail = api.get(f"/api/v1/evaluations/{stored.evaluation.pk}/").json()
    web = Client()
    web.force_login(researcher)
    assert detail["behaviour"] == web.get(stored.url("export.json")).json()["behaviour"]
    assert detail["behaviour"] == evaluation_report(stored.evaluation)["behaviour"]
    assert len(detail["behaviour"]["situations"]) == 3
    one = api.get(f"/api/v1/evaluations/{stored.evaluation.pk}/", {"situation": "headquarters_first_page"}).json()
    assert [s["name"] for s in one["behaviour"]["situations"]] == ["headquarters_first_page"]
    bad = api.get(f"/api/v1/evaluations/{stored.evaluation.pk}/", {"situation": "nope\x00"})
    assert bad.status_code == 400 and bad["Content-Type"].startswith("application/json")
    body = bad.json()
    assert "decoy_on_top, headquarters_first_page, birthplace" in body["detail"]
    assert body["errors"] == [{"field": "situation", "message": "unknown situation"}]
