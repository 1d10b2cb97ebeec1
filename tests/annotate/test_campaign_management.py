"""Running a campaign without the Django admin: settings checked with reasons, status
changes that lose nothing, pools, filling from stored trajectories with each pairing
strategy (hand-built cases with known counts), gold upload and promotion, clone, and
the REST routes for each role."""

import json

import pytest
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import SimpleUploadedFile

from annotate.campaign_access import dimensions_of
from annotate.models import Campaign, CampaignFill, Comparison, ImportBatch, Trajectory
from annotate.services.assignments import Verdict, assignment_next, judgement_submit
from annotate.services.campaign_fill import campaign_fill_create, fill_preview, fill_request_clean
from annotate.services.campaigns import campaign_act, campaign_clone, campaign_create, campaign_update
from annotate.services.comparisons import comparisons_plan
from annotate.services.gold import gold_import, gold_promote_adjudicated, gold_rows_read
from annotate.services.imports import import_upload_create
from tests.conftest import api_rows, token_client
from tests.factories import CampaignFactory, PolicyFactory, TaskFactory, TrajectoryFactory, UserFactory
from webapp.errors import ArbiterError

pytestmark = pytest.mark.django_db


def fields_of(exc: ArbiterError) -> dict:
    return {d["field"]: d["message"] for d in exc.details}


# --- settings ------------------------------------------------------------------------------


def test_bad_settings_are_all_named_with_the_allowed_range():
    with pytest.raises(ArbiterError) as caught:
        campaign_create(
            data={
                "name": "x",
                "gold_rate": 1.5,
                "votes_per_comparison": 0,
                "lease_seconds": "soon",
                "dimensions": [{"name": "correctness"}, {"scale": 7, "description": "how fast"}],
                "task_split": "holdout",
                "colour": "red",
            },
            created_by=None,
        )
    problems = fields_of(caught.value)
    assert "between 0 and 1" in problems["gold_rate"] and "1.5" in problems["gold_rate"]
    assert "between 1 and 50" in problems["votes_per_comparison"]
    assert "whole number" in problems["lease_seconds"]
    assert "dimension 2 has no name" in problems["dimensions[2].name"]
    assert "train, dev, eval" in problems["task_split"]
    assert problems["colour"] == "is not a campaign setting."
    assert not Campaign.objects.exists()


def test_a_campaign_is_created_with_dimensions_and_a_pool():
    alice = UserFactory(username="alice", roles=["annotator"])
    campaign = campaign_create(
        data={
            "name": "Round 1",
            "guidelines": "## Be *kind*",
            "votes_per_comparison": 2,
            "gold_rate": "0.1",
            "dimensions": ["correctness", {"name": "speed", "scale": 3, "description": "fewer steps"}],
            "pool_only": True,
            "pool": ["alice"],
            "task_split": "train",
        },
        created_by=None,
    )
    assert campaign.dimensions == [
        {"name": "correctness", "scale": 5, "description": "", "required": False},
        {"name": "speed", "scale": 3, "description": "fewer steps", "required": False},
    ]
    assert list(campaign.pool.all()) == [alice] and campaign.gold_rate == 0.1


def test_the_pool_takes_only_people_who_can_label():
    """Each refusal on its own, so none can pass for another (a missing role, no such user, an
    inactive account); annotators and admins are taken."""
    UserFactory(username="reader", roles=["researcher"])
    UserFactory(username="gone", roles=["annotator"], is_active=False)
    UserFactory(username="ann", roles=["annotator"])
    UserFactory(username="boss", roles=["admin"])
    refusals = {
        "reader": "reader cannot label (inactive, or without the annotator role).",
        "gone": "gone cannot label (inactive, or without the annotator role).",
        "ghost": "no such user: ghost.",
    }
    for who, refusal in refusals.items():
        with pytest.raises(ArbiterError) as caught:
            campaign_create(data={"name": f"p-{who}", "pool": ["ann", who]}, created_by=None)
        assert fields_of(caught.value)["pool"] == refusal
    campaign = campaign_create(data={"name": "p", "pool": ["ann", "boss"]}, created_by=None)
    assert sorted(campaign.pool.values_list("username", flat=True)) == ["ann", "boss"]


def test_stored_dimension_names_read_as_five_point_scales():
    assert dimensions_of(CampaignFactory(dimensions=["a"])) == [
        {"name": "a", "scale": 5, "description": "", "required": False}
    ]
    # Stored before dimensions could be required: optional.
    assert (
        dimensions_of(CampaignFactory(dimensions=[{"name": "b", "scale": 3, "description": ""}]))[0]["required"]
        is False
    )


def _pair(campaign, task=None):
    task = task or TaskFactory()
    a, b = sorted((TrajectoryFactory(task=task), TrajectoryFactory(task=task)), key=lambda t: t.pk)
    return Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=b)


def _judge(campaign, user, choice=1):
    assignment = assignment_next(campaign=campaign, annotator=user)
    return judgement_submit(assignment_id=assignment.pk, annotator=user, verdict=Verdict(choice=choice))


def test_k_cannot_go_below_the_votes_given_and_a_new_k_reopens_or_completes():
    campaign = CampaignFactory(votes_per_comparison=2)
    comparison = _pair(campaign)
    first, second = UserFactory(roles=["annotator"]), UserFactory(roles=["annotator"])
    _judge(campaign, first)
    _judge(campaign, second)
    comparison.refresh_from_db()
    assert comparison.status == "complete"
    with pytest.raises(ArbiterError) as caught:
        campaign_update(campaign=campaign, data={"votes_per_comparison": 1})
    assert "cannot go below 2" in fields_of(caught.value)["votes_per_comparison"]
    campaign = campaign_update(campaign=campaign, data={"votes_per_comparison": 3})
    comparison.refresh_from_db()
    assert comparison.status == "open"
    third = UserFactory(roles=["annotator"])
    _judge(campaign, third)
    comparison.refresh_from_db()
    assert comparison.status == "complete" and comparison.votes == 3


# --- status -----------------------------------------------------------------------------------


def test_pausing_hands_out_nothing_and_loses_no_lease_being_worked_on():
    campaign = CampaignFactory(votes_per_comparison=1)
    _pair(campaign)
    _pair(campaign)
    worker, late = UserFactory(roles=["annotator"]), UserFactory(roles=["annotator"])
    lease = assignment_next(campaign=campaign, annotator=worker)
    campaign_act(campaign=campaign, action="pause")
    campaign.refresh_from_db()
    with pytest.raises(ArbiterError, match="paused"):
        assignment_next(campaign=campaign, annotator=late)
    judgement, created = judgement_submit(assignment_id=lease.pk, annotator=worker, verdict=Verdict(choice=2))
    assert created and judgement.pk
    campaign_act(campaign=campaign, action="resume")
    campaign.refresh_from_db()
    assert assignment_next(campaign=campaign, annotator=late) is not None


def test_a_status_change_that_makes_no_sense_says_what_can_be_done():
    campaign = CampaignFactory()
    with pytest.raises(ArbiterError, match="An active campaign cannot archive; it can pause or close"):
        campaign_act(campaign=campaign, action="archive")
    campaign_act(campaign=campaign, action="close")
    assert campaign_act(campaign=campaign, action="archive").status == "archived"


# --- pools ------------------------------------------------------------------------------------


def test_an_annotator_outside_the_pool_is_refused_and_not_offered_the_campaign(client):
    inside, outside = UserFactory(roles=["annotator"]), UserFactory(roles=["annotator"])
    campaign = CampaignFactory(pool_only=True)
    campaign.pool.set([inside])
    _pair(campaign)
    assert assignment_next(campaign=campaign, annotator=inside) is not None
    with pytest.raises(PermissionDenied):
        assignment_next(campaign=campaign, annotator=outside)
    api = token_client(outside)
    assert api.get(f"/api/v1/assignments/next?campaign={campaign.pk}").status_code == 403
    assert [c["id"] for c in api_rows(api, "/api/v1/campaigns/")] == []
    assert api.get(f"/api/v1/campaigns/{campaign.pk}").status_code == 404
    client.force_login(outside)
    assert client.get(f"/annotate/campaigns/{campaign.pk}/label/").status_code == 403
    assert campaign.name not in client.get("/annotate/campaigns/").content.decode()
    ok = api_rows(token_client(inside), "/api/v1/campaigns/")
    assert [c["id"] for c in ok] == [campaign.pk] and ok[0]["may_label"]


# --- pairing strategies on a hand-built task ---------------------------------------------------


def _arena():
    """One task: policy A has 3 trajectories (2 correct), policy B has 2 (1 correct), and
    B's second is an identical copy of A's first under another name."""
    task = TaskFactory()
    a, b = PolicyFactory(name="agent-a"), PolicyFactory(name="agent-b")

    def steps(q, answer):
        return [
            {"kind": "action", "tool": "search", "arguments": {"query": q}},
            {"kind": "observation", "tool": "search", "content": "r"},
            {"kind": "answer", "text": answer},
        ]

    a1 = TrajectoryFactory(task=task, policy=a, steps=steps("x", "Paris"), outcome={"correct": True})
    a2 = TrajectoryFactory(task=task, policy=a, steps=steps("x", "Lyon"), outcome={"correct": False})
    a3 = TrajectoryFactory(task=task, policy=a, steps=steps("y", "Paris"), outcome={"correct": True})
    b1 = TrajectoryFactory(task=task, policy=b, steps=steps("z", "Nice"), outcome={"correct": False})
    b2 = TrajectoryFactory(task=task, policy=b, steps=steps("x", "Paris"), outcome={"correct": True})
    return task, a, b, (a1, a2, a3, b1, b2)


@pytest.mark.parametrize(
    "strategy, expected",
    [
        ("all_pairs", 9),  # C(5,2) = 10 less the identical a1-b2
        ("outcome_differs", 6),  # correct {a1,a3,b2} x wrong {a2,b1}
        ("policy_vs_policy", 5),  # 3 x 2 less the identical a1-b2
        ("same_calls_different_answer", 2),  # search x: a1-a2 and a2-b2
    ],
)
def test_each_pairing_strategy_makes_the_known_number_of_pairs(strategy, expected):
    task, a, b, _ = _arena()
    campaign = CampaignFactory()
    plan = comparisons_plan(campaign=campaign, strategy=strategy, max_per_task=100, policy_a=a.pk, policy_b=b.pk)
    assert len(plan.pairs) == expected
    assert plan.identical == 1
    if strategy == "policy_vs_policy":
        policies = dict(Trajectory.objects.values_list("pk", "policy_id"))
        assert all({policies[x], policies[y]} == {a.pk, b.pk} for _, x, y in plan.pairs)


def test_filling_is_capped_per_task_and_idempotent():
    _arena()
    campaign = CampaignFactory()
    request = fill_request_clean({"strategy": "all_pairs", "max_per_task": 4, "all_trajectories": True})
    assert fill_preview(campaign=campaign, request=request)["comparisons"] == 4
    fill = campaign_fill_create(campaign=campaign, request=request, created_by=None)
    assert fill.status == "succeeded" and fill.created_count == 4 and fill.identical_count == 1
    again = campaign_fill_create(
        campaign=campaign, request=fill_request_clean({"max_per_task": 100, "all_trajectories": True}), created_by=None
    )
    assert again.created_count == 5 and campaign.comparisons.count() == 9
    assert campaign_fill_create(campaign=campaign, request=request, created_by=None).created_count == 0


def test_fill_requests_name_every_bad_field():
    with pytest.raises(ArbiterError) as caught:
        fill_request_clean(
            {
                "strategy": "policy_vs_policy",
                "policy_a": 999999,
                "max_per_task": 0,
                "import_batches": ["x"],
                "split": "nope",
            }
        )
    problems = fields_of(caught.value)
    assert {"policy_a", "max_per_task", "import_batches", "split"} <= set(problems)


def _jsonl(*objects) -> SimpleUploadedFile:
    return SimpleUploadedFile("t.jsonl", "\n".join(json.dumps(o) for o in objects).encode())


def _canonical(task_id: str, agent: str, answer: str) -> dict:
    return {
        "schema": "arbiter.trajectory/v1",
        "task": {"external_id": task_id, "prompt": f"Q {task_id}?"},
        "agent": {"name": agent},
        "steps": [{"kind": "thought", "text": "hm"}, {"kind": "answer", "text": answer}],
    }


def test_a_fill_by_import_batch_pairs_trajectories_already_stored():
    rows = [
        _canonical("t1", "a", "1"),
        _canonical("t1", "b", "2"),
        _canonical("t2", "a", "3"),
        _canonical("t2", "b", "4"),
    ]
    first = import_upload_create(upload=_jsonl(*rows), campaign=None, created_by=None)
    other = import_upload_create(upload=_jsonl(_canonical("t1", "c", "5")), campaign=None, created_by=None)
    assert Trajectory.objects.filter(import_batch=first).count() == 4
    campaign = CampaignFactory()
    fill = campaign_fill_create(
        campaign=campaign, request=fill_request_clean({"import_batches": [first.pk]}), created_by=None
    )
    assert fill.created_count == 2  # one pair per task, none with the other batch's trajectory
    assert not campaign.comparisons.filter(trajectory_b__import_batch=other).exists()
    # Re-importing the stored file into a new campaign builds its comparisons (it used to build 0).
    second = CampaignFactory()
    again = import_upload_create(upload=_jsonl(*rows), campaign=second, created_by=None)
    assert again.duplicate_count == 4 and again.comparisons_created == 2


def test_a_fill_names_its_source_and_says_when_it_built_nothing(client, admin_user):
    """Nothing picked is refused (not every stored trajectory in one click); a tag that matches
    nothing builds nothing and says so, as a warning."""
    _arena()
    campaign = CampaignFactory()
    with pytest.raises(ArbiterError, match="pick where the trajectories come from"):
        fill_request_clean({"strategy": "all_pairs"})
    client.force_login(admin_user)
    page = client.post(f"/annotate/campaigns/{campaign.pk}/fill", {"strategy": "all_pairs"}, follow=True)
    assert "pick where the trajectories come from" in page.content.decode()
    assert not Comparison.objects.filter(campaign=campaign).exists()
    page = client.post(
        f"/annotate/campaigns/{campaign.pk}/fill", {"strategy": "all_pairs", "tags": "no-such-tag"}, follow=True
    ).content.decode()
    assert "Nothing was built: no stored trajectory matches tag no-such-tag." in page
    assert 'class="msg-warning"' in page
    assert not Comparison.objects.filter(campaign=campaign).exists()


def test_a_large_fill_runs_as_a_job(settings):
    settings.FILL_INLINE_MAX_TRAJECTORIES = 2
    _arena()
    campaign = CampaignFactory()
    fill = campaign_fill_create(
        campaign=campaign, request=fill_request_clean({"all_trajectories": True}), created_by=None
    )
    assert fill.status == "queued"  # the worker's task runs it (on commit, which tests do not reach)
    from annotate.tasks import campaign_fill_task

    campaign_fill_task(fill.pk)
    fill.refresh_from_db()
    assert fill.status == "succeeded" and fill.progress == 1.0 and fill.created_count == 9


# --- gold --------------------------------------------------------------------------------------


def test_gold_upload_is_all_or_nothing_with_line_numbers():
    campaign = CampaignFactory()
    existing = _pair(campaign)
    task = TaskFactory()
    x, y = TrajectoryFactory(task=task), TrajectoryFactory(task=task)
    elsewhere = TrajectoryFactory()
    bad = (
        f'{{"comparison": {existing.pk}, "choice": 2}}\n'
        f'{{"trajectory_a": {y.pk}, "trajectory_b": {x.pk}, "choice": 6}}\n'
        f'{{"trajectory_a": {x.pk}, "trajectory_b": {elsewhere.pk}, "choice": 1}}\nnot json\n'
    ).encode()
    with pytest.raises(ArbiterError) as caught:
        gold_import(campaign=campaign, rows=gold_rows_read(bad, filename="gold.jsonl"))
    lines = {d["line"]: d["message"] for d in caught.value.details}
    assert set(lines) == {2, 3, 4} and "choice must be 1-5" in lines[2] and "different tasks" in lines[3]
    assert not Comparison.objects.filter(is_gold=True).exists()

    good = f"trajectory_a,trajectory_b,choice\n{y.pk},{x.pk},1\n".encode()
    assert gold_import(campaign=campaign, rows=gold_rows_read(good, filename="gold.csv")) == {"marked": 0, "created": 1}
    gold = Comparison.objects.get(is_gold=True)
    assert (gold.trajectory_a_id, gold.gold_choice) == (min(x.pk, y.pk), 5 if y.pk > x.pk else 1)


def test_adjudicated_comparisons_become_gold_in_one_action(admin_user):
    from annotate.services.assignments import comparison_adjudicate

    campaign = CampaignFactory()
    ruled, open_one = _pair(campaign), _pair(campaign)
    comparison_adjudicate(comparison=ruled, admin=admin_user, choice=4)
    assert gold_promote_adjudicated(campaign=campaign) == 1
    ruled.refresh_from_db()
    open_one.refresh_from_db()
    assert ruled.is_gold and ruled.gold_choice == 4 and not open_one.is_gold


def test_a_clone_has_the_settings_and_no_comparisons():
    source = campaign_create(
        data={
            "name": "R1",
            "guidelines": "g",
            "votes_per_comparison": 4,
            "dimensions": ["x"],
            "rationale_required": True,
        },
        created_by=None,
    )
    _pair(source)
    copy = campaign_clone(campaign=source, name="R2", created_by=None)
    assert (copy.guidelines, copy.votes_per_comparison, copy.rationale_required, copy.cloned_from) == (
        "g",
        4,
        True,
        source,
    )
    assert copy.comparisons.count() == 0
    with pytest.raises(ArbiterError, match="exists already"):
        campaign_clone(campaign=source, name="R2", created_by=None)


# --- REST -------------------------------------------------------------------------------------


def test_the_api_creates_edits_acts_fills_and_deletes(admin_api):
    _arena()
    made = admin_api.post("/api/v1/campaigns/", {"name": "API", "gold_rate": 1.5}, format="json")
    assert made.status_code == 400 and made.json()["errors"][0]["field"] == "gold_rate"
    made = admin_api.post(
        "/api/v1/campaigns/", {"name": "API", "dimensions": [{"name": "c", "scale": 3}]}, format="json"
    )
    assert made.status_code == 201, made.json()
    cid = made.json()["id"]
    assert (
        admin_api.patch(f"/api/v1/campaigns/{cid}", {"votes_per_comparison": 5}, format="json").json()[
            "votes_per_comparison"
        ]
        == 5
    )
    preview = admin_api.post(
        f"/api/v1/campaigns/{cid}/fill/preview",
        {"strategy": "outcome_differs", "all_trajectories": True},
        format="json",
    )
    assert preview.json()["comparisons"] == 6
    fill = admin_api.post(
        f"/api/v1/campaigns/{cid}/fills/", {"strategy": "outcome_differs", "all_trajectories": True}, format="json"
    )
    assert fill.status_code == 201 and fill.json()["created_count"] == 6
    assert admin_api.get(f"/api/v1/campaigns/{cid}").json()["progress"]["needed"] == 30
    paused = admin_api.post(f"/api/v1/campaigns/{cid}/status", {"action": "pause"}, format="json")
    assert paused.json()["status"] == "paused"
    wrong = admin_api.post(f"/api/v1/campaigns/{cid}/status", {"action": "archive"}, format="json")
    assert wrong.status_code == 400 and "cannot archive" in wrong.json()["detail"]
    clone = admin_api.post(f"/api/v1/campaigns/{cid}/clone", {"name": "API 2"}, format="json")
    assert clone.status_code == 201 and clone.json()["votes_per_comparison"] == 5
    assert admin_api.delete(f"/api/v1/campaigns/{clone.json()['id']}").status_code == 204


def test_gold_over_the_api_names_the_bad_line(admin_api):
    campaign = CampaignFactory()
    comparison = _pair(campaign)
    bad = admin_api.post(
        f"/api/v1/campaigns/{campaign.pk}/gold",
        {"file": SimpleUploadedFile("g.jsonl", b'{"comparison": 1, "choice": 9}\n')},
        format="multipart",
    )
    assert bad.status_code == 400 and bad.json()["errors"][0]["line"] == 1
    good = admin_api.post(
        f"/api/v1/campaigns/{campaign.pk}/gold", [{"comparison": comparison.pk, "choice": 1}], format="json"
    )
    assert good.status_code == 201 and good.json() == {"marked": 1, "created": 0}


ADMIN_ROUTES = [
    ("post", "/api/v1/campaigns/", {"name": "n"}),
    ("patch", "/api/v1/campaigns/{id}", {"guidelines": "x"}),
    ("delete", "/api/v1/campaigns/{id}", None),
    ("post", "/api/v1/campaigns/{id}/status", {"action": "pause"}),
    ("post", "/api/v1/campaigns/{id}/clone", {"name": "c"}),
    ("post", "/api/v1/campaigns/{id}/fill/preview", {}),
    ("post", "/api/v1/campaigns/{id}/fills/", {}),
    ("get", "/api/v1/campaigns/{id}/fills/", None),
    ("post", "/api/v1/campaigns/{id}/gold", []),
    ("post", "/api/v1/campaigns/{id}/gold/promote", {}),
]


@pytest.mark.parametrize("method, path, body", ADMIN_ROUTES)
def test_admin_routes_refuse_every_other_role(method, path, body, role_users):
    campaign = CampaignFactory()
    for role in ("annotator", "researcher"):
        response = getattr(token_client(role_users[role]), method)(path.format(id=campaign.pk), body, format="json")
        assert response.status_code == 403, (role, response.content)
        assert "detail" in response.json()
    from rest_framework.test import APIClient

    assert getattr(APIClient(), method)(path.format(id=campaign.pk), body, format="json").status_code in (401, 403)


def test_activity_is_for_readers_with_pseudonyms_for_researchers(role_users):
    campaign = CampaignFactory(votes_per_comparison=1)
    _pair(campaign)
    _judge(campaign, role_users["annotator"])
    assert token_client(role_users["annotator"]).get(f"/api/v1/campaigns/{campaign.pk}/activity").status_code == 403
    seen = token_client(role_users["researcher"]).get(f"/api/v1/campaigns/{campaign.pk}/activity").json()
    assert seen["annotators"][0]["username"].startswith("annotator-") and seen["annotators"][0]["judgements"] == 1
    by_admin = token_client(role_users["admin"]).get(f"/api/v1/campaigns/{campaign.pk}/activity").json()
    assert by_admin["annotators"][0]["username"] == "ann" and sum(d["judgements"] for d in by_admin["daily"]) == 1


ADMIN_PAGES = ["/annotate/campaigns/new/", "/annotate/campaigns/{id}/edit/"]
ADMIN_POSTS = [
    "/annotate/campaigns/{id}/status",
    "/annotate/campaigns/{id}/clone",
    "/annotate/campaigns/{id}/fill",
    "/annotate/campaigns/{id}/gold",
    "/annotate/campaigns/{id}/gold/promote",
    "/annotate/campaigns/markdown-preview",
]


def test_campaign_pages_for_each_role(client, role_users):
    campaign = CampaignFactory()
    for role, user in role_users.items():
        client.force_login(user)
        assert client.get(f"/annotate/campaigns/{campaign.pk}/").status_code == 200
        for page in ADMIN_PAGES:
            assert client.get(page.format(id=campaign.pk)).status_code == (200 if role == "admin" else 403)
        if role != "admin":
            for page in ADMIN_POSTS:
                assert client.post(page.format(id=campaign.pk)).status_code == 403
    client.logout()
    assert client.get(f"/annotate/campaigns/{campaign.pk}/").status_code == 302


def test_the_settings_form_shows_each_problem_and_keeps_what_was_typed(client, admin_user):
    client.force_login(admin_user)
    response = client.post(
        "/annotate/campaigns/new/",
        {
            "name": "Form",
            "gold_rate": "1.5",
            "votes_per_comparison": "3",
            "lease_minutes": "15",
            "dimension_name": ["ok", "", ""],
            "dimension_scale": ["5", "4", "5"],
            "dimension_description": ["", "orphan", ""],
            "dimension_required": ["yes", "", ""],
        },
    )
    page = response.content.decode()
    assert response.status_code == 400
    assert "between 0 and 1" in page and "dimension 2 has no name" in page and 'value="Form"' in page
    assert "dimension 3 has no name" in page  # a row left blank is named, never dropped
    assert "<strong>Gold rate</strong>" in page and "gold_rate</strong>" not in page  # the form's labels
    assert '<option value="yes" selected>' in page  # the required flag survives the refusal
    response = client.post("/annotate/campaigns/new/", {"name": "Form", "lease_minutes": "0.1"})
    assert (
        "must be a number of minutes between 0.5 and 10,080 (a week); got &#x27;0.1&#x27;" in response.content.decode()
    )
    response = client.post(
        "/annotate/campaigns/new/",
        {
            "name": "Form",
            "gold_rate": "0.2",
            "votes_per_comparison": "2",
            "lease_minutes": "10",
            "guidelines": "# Hi",
            "dimension_name": ["ok"],
            "dimension_scale": ["4"],
            "dimension_description": ["d"],
            "dimension_required": ["yes"],
            "pool_only": "everyone",
        },
    )
    campaign = Campaign.objects.get(name="Form")
    assert response.status_code == 302 and campaign.lease_seconds == 600
    assert campaign.dimensions == [{"name": "ok", "scale": 4, "description": "d", "required": True}]
    preview = client.post("/annotate/campaigns/markdown-preview", {"guidelines": "**b** <script>x</script>"})
    assert "<strong>b</strong>" in preview.content.decode() and "<script>" not in preview.content.decode()


def test_the_fill_form_previews_then_builds(client, admin_user):
    _arena()
    campaign = CampaignFactory()
    client.force_login(admin_user)
    preview = client.post(
        f"/annotate/campaigns/{campaign.pk}/fill",
        {"strategy": "all_pairs", "max_per_task": "3", "preview": "1", "all_trajectories": "on"},
    )
    assert "<strong>3</strong> new comparisons" in preview.content.decode()
    assert campaign.comparisons.count() == 0
    built = client.post(
        f"/annotate/campaigns/{campaign.pk}/fill",
        {"strategy": "all_pairs", "max_per_task": "3", "all_trajectories": "on"},
    )
    assert built.status_code == 302 and campaign.comparisons.count() == 3
    assert CampaignFill.objects.get().created_count == 3
    assert ImportBatch.objects.count() == 0


def test_agreement_at_a_glance_counts_pairs_of_votes_on_the_same_side():
    from annotate.selectors import campaign_progress

    campaign = CampaignFactory(votes_per_comparison=2)
    first, second = _pair(campaign), _pair(campaign)
    ann1, ann2 = UserFactory(roles=["annotator"]), UserFactory(roles=["annotator"])
    for user, verdicts in ((ann1, {first.pk: "A", second.pk: "A"}), (ann2, {first.pk: "A", second.pk: "B"})):
        for _ in range(2):
            lease = assignment_next(campaign=campaign, annotator=user)
            wants_a = verdicts[lease.comparison_id] == "A"
            judgement_submit(
                assignment_id=lease.pk, annotator=user, verdict=Verdict(choice=1 if wants_a == lease.left_is_a else 5)
            )
    assert campaign_progress(campaigns=[campaign], user=ann1)[campaign.pk]["agreement"] == 0.5


def test_uncertainty_first_builds_all_pairs_then_queues_a_scoring_run(admin_user):
    from annotate.models import DatasetSnapshot
    from rewardmodel.models import RewardModel
    from webapp.models import Run

    _arena()
    campaign = CampaignFactory()
    snapshot = DatasetSnapshot.objects.create(name="s")
    model = RewardModel.objects.create(name="rm", snapshot=snapshot, backbone="tiny", model_dir="/nowhere")
    with pytest.raises(ArbiterError, match="needs the reward model"):
        fill_request_clean({"strategy": "rm_uncertainty"})
    request = fill_request_clean({"strategy": "rm_uncertainty", "reward_model": model.pk, "all_trajectories": True})
    assert fill_preview(campaign=campaign, request=request)["then_scoring_run"]
    fill = campaign_fill_create(campaign=campaign, request=request, created_by=admin_user)
    assert fill.status == "succeeded" and fill.created_count == 9
    run = Run.objects.get(kind="reward_scoring")
    assert run.config["order"] == "closest" and run.config["reward_model_id"] == model.pk
    assert f"Scoring run #{run.pk}" in fill.message


def test_a_task_with_thousands_of_trajectories_is_sampled_not_listed():
    """4,000 trajectories of one task are 8 million pairs: the preview draws up to the cap instead
    of building them (it took 60 s and 550 MB), and still finds the rare pairs a strategy wants."""
    import time

    from annotate.models import Trajectory
    from tests.factories import PolicyFactory

    task, policy = TaskFactory(), PolicyFactory()
    rows = [
        Trajectory(
            task=task,
            policy=policy,
            steps=[{"kind": "answer", "text": f"a{i}"}],
            answer=f"a{i}",
            num_steps=1,
            content_hash=f"h{i:06d}",
            behaviour_hash=f"b{i:06d}",
            outcome={"correct": i == 7},
        )
        for i in range(4000)
    ]
    Trajectory.objects.bulk_create(rows)
    campaign = CampaignFactory()
    started = time.perf_counter()
    preview = fill_preview(
        campaign=campaign,
        request=fill_request_clean({"strategy": "all_pairs", "max_per_task": 10, "all_trajectories": True}),
    )
    assert time.perf_counter() - started < 10
    assert preview["comparisons"] == 10 and preview["sampled_tasks"] == 1
    assert preview["left_out_by_cap"] == 4000 * 3999 // 2 - 10
    rare = fill_preview(
        campaign=campaign,
        request=fill_request_clean({"strategy": "outcome_differs", "max_per_task": 5, "all_trajectories": True}),
    )
    assert rare["comparisons"] == 5  # each pairs the one correct trajectory with a wrong one
    fill = campaign_fill_create(
        campaign=campaign,
        request=fill_request_clean({"strategy": "outcome_differs", "max_per_task": 5, "all_trajectories": True}),
        created_by=None,
    )
    correct = Trajectory.objects.get(content_hash="h000007").pk
    pairs = Comparison.objects.filter(campaign=campaign).values_list("trajectory_a_id", "trajectory_b_id")
    assert fill.created_count == 5 and all(correct in pair for pair in pairs)
