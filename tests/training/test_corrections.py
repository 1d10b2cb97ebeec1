"""Corrections (issue 33, first part): an annotator fixes one side of a comparison over the API;
in the encyclopedia the fix is played in the environment (real observations, the rubric's
outcome); elsewhere it is stored as edited and marked so; calls are checked against the tools'
schemas; admins review corrections; bad bodies are refused with nothing stored."""

from __future__ import annotations

import pytest

from annotate.models import Assignment, Comparison, Correction, Trajectory
from annotate.services.assignments import assignment_next
from tests.conftest import token_client
from tests.factories import CampaignFactory, TaskFactory, TrajectoryFactory, UserFactory
from tests.helpers import replays_run
from training.simulation import scripted_trajectories_generate

pytestmark = pytest.mark.django_db

SEARCH_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    }
]


@pytest.fixture
def annotator():
    return UserFactory(roles=["annotator"])


def _encyclopedia_assignment(annotator, seed: int = 3):
    campaign = CampaignFactory(votes_per_comparison=1)
    scripted_trajectories_generate(campaign=campaign, n_tasks=2, seed=seed)
    assignment = assignment_next(campaign=campaign, annotator=annotator)
    assert assignment is not None
    return assignment


def _side(assignment, side):
    c = assignment.comparison
    return c.trajectory_a if (side == "left") == assignment.left_is_a else c.trajectory_b


def test_an_answer_fixed_in_the_encyclopedia_is_replayed_and_scored_by_the_rubric(annotator):
    assignment = _encyclopedia_assignment(annotator, seed=5)  # its first comparison has a wrong side
    # A side that answered wrong (the right answer given back would be a no-op, refused).
    side = next(
        s for s in ("left", "right") if _side(assignment, s).answer != _side(assignment, s).task.reference_answer
    )
    original = _side(assignment, side)
    reference = original.task.reference_answer
    api = token_client(annotator)
    response = api.post(
        f"/api/v1/assignments/{assignment.pk}/correction",
        {"side": side, "kind": "answer", "answer": reference},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    # The web process stores it as edited and queues its replay on a worker (it never starts an environment).
    assert body["replayed"] is False and body["replay"] == {"state": "queued", "note": ""}
    assert "queued to be played in encyclopedia" in body["note"] and body["status"] == "pending"
    assert "outcome" not in body and body["answer"] == reference  # the rubric is never shown to annotators
    admin = token_client(UserFactory(roles=["admin"]))
    refused = admin.post(f"/api/v1/corrections/{body['id']}/review", {"decision": "accept"}, format="json")
    assert refused.status_code == 400 and "still being played" in refused.json()["detail"]
    assert replays_run() == 1
    body = token_client(UserFactory(roles=["researcher"])).get(f"/api/v1/corrections/{body['id']}").json()
    assert body["replayed"] is True and body["replay"] == {"state": "replayed", "note": ""}
    assert not Trajectory.objects.filter(source="corrected").exclude(pk=body["corrected"]).exists()  # edited one gone
    corrected = Trajectory.objects.get(pk=body["corrected"])
    assert corrected.outcome["correct"] is True
    researcher = UserFactory(roles=["researcher"])
    assert token_client(researcher).get(f"/api/v1/corrections/{body['id']}").json()["outcome"]["correct"] is True
    answer_at = next(i for i, s in enumerate(original.steps) if s["kind"] == "answer")
    assert corrected.steps[:answer_at] == original.steps[:answer_at]  # the same calls met the same observations
    assert corrected.source == "corrected" and corrected.policy.name == "human correction"
    assert corrected.metadata["corrected_from"] == original.pk and corrected.task_id == original.task_id
    correction = Correction.objects.get(pk=body["id"])
    assert correction.original == original and correction.comparison == assignment.comparison
    assert correction.author == annotator and correction.kind == "answer"


def test_a_replaced_tool_call_runs_in_the_environment_and_continues_by_hand(annotator):
    assignment = _encyclopedia_assignment(annotator)
    original = _side(assignment, "right")
    first_action = next(i for i, s in enumerate(original.steps) if s["kind"] == "action")
    reference = original.task.reference_answer
    body = {
        "side": "right",
        "kind": "tool_call",
        "step": first_action,
        "calls": [{"tool": "search", "arguments": {"query": original.task.prompt}}],
        "answer": reference,
    }
    response = token_client(annotator).post(f"/api/v1/assignments/{assignment.pk}/correction", body, format="json")
    assert response.status_code == 201, response.content
    replays_run()
    response = token_client(UserFactory(roles=["researcher"])).get(f"/api/v1/corrections/{response.json()['id']}")
    steps = response.json()["steps"]
    call, seen = steps[first_action], steps[first_action + 1]
    assert call == {"kind": "action", "tool": "search", "arguments": {"query": original.task.prompt}}
    assert seen["kind"] == "observation" and seen["content"]  # what the encyclopedia's search said
    assert steps[-1] == {"kind": "answer", "text": reference}
    corrected = Trajectory.objects.get(pk=response.json()["corrected"])
    assert corrected.outcome["steps"] == 2  # the search and the answer: the rubric counted them


@pytest.mark.parametrize(
    "calls, field",
    [
        ([{"tool": "search", "arguments": {"q": "x"}}], "calls[0].arguments"),
        ([{"tool": "search", "arguments": {"query": 5}}], "calls[0].arguments.query"),
        ([{"tool": "teleport", "arguments": {}}], "calls[0].tool"),
        ([{"tool": "search", "arguments": "query=x"}], "calls[0].arguments"),
    ],
)
def test_a_call_its_tool_refuses_is_not_stored(annotator, calls, field):
    assignment = _encyclopedia_assignment(annotator)
    original = _side(assignment, "left")
    step = next(i for i, s in enumerate(original.steps) if s["kind"] == "action")
    body = {"side": "left", "kind": "tool_call", "step": step, "calls": calls}
    response = token_client(annotator).post(f"/api/v1/assignments/{assignment.pk}/correction", body, format="json")
    assert response.status_code == 400, response.content
    assert field in [e.get("field") for e in response.json()["errors"]], response.json()
    assert not Correction.objects.exists()


def _plain_assignment(annotator, **task):
    """A comparison of imported trajectories whose task has no environment here."""
    campaign = CampaignFactory(votes_per_comparison=1)
    task = TaskFactory(**task)
    a = TrajectoryFactory(task=task, metadata={"tools": SEARCH_TOOLS})
    b = TrajectoryFactory(task=task, metadata={"tools": SEARCH_TOOLS})
    Comparison.objects.create(campaign=campaign, task=task, trajectory_a=a, trajectory_b=b)
    return assignment_next(campaign=campaign, annotator=annotator)


def test_without_an_environment_a_correction_is_stored_as_edited_and_says_so(annotator):
    assignment = _plain_assignment(annotator, environment="")
    body = {
        "side": "left",
        "kind": "tool_call",
        "step": 0,
        "calls": [{"tool": "search", "arguments": {"query": "the right thing"}, "observation": "found it"}],
        "answer": "the fix",
    }
    response = token_client(annotator).post(f"/api/v1/assignments/{assignment.pk}/correction", body, format="json")
    assert response.status_code == 201, response.content
    got = response.json()
    assert got["replayed"] is False and "names no environment" in got["note"]
    assert Trajectory.objects.get(pk=got["corrected"]).outcome is None
    assert got["steps"] == [
        {"kind": "action", "tool": "search", "arguments": {"query": "the right thing"}},
        {"kind": "observation", "tool": "search", "content": "found it"},
        {"kind": "answer", "text": "the fix"},
    ]
    # Checked against the tools the trajectory declared, even with nothing to run them.
    body["calls"] = [{"tool": "search", "arguments": {"query": "x", "extra": 1}}]
    assert (
        token_client(annotator).post(f"/api/v1/assignments/{assignment.pk}/correction", body, format="json").status_code
        == 400
    )


def test_an_environment_that_answers_otherwise_now_is_not_replayed(annotator):
    assignment = _encyclopedia_assignment(annotator)
    original = _side(assignment, "left")
    steps = [dict(s) for s in original.steps]
    seen = next(  # the observation of a real call (a refused turn's is the runner's, not the world's)
        i for i, s in enumerate(steps) if s["kind"] == "observation" and steps[i - 1].get("tool") != "invalid"
    )
    steps[seen]["content"] = "a page this world does not have"
    Trajectory.objects.filter(pk=original.pk).update(steps=steps)
    answer_at = next(i for i, s in enumerate(steps) if s["kind"] == "answer")
    assert answer_at > seen
    response = token_client(annotator).post(
        f"/api/v1/assignments/{assignment.pk}/correction",
        {"side": "left", "kind": "answer", "answer": "x"},
        format="json",
    )
    assert response.status_code == 201, response.content
    replays_run()
    got = token_client(UserFactory(roles=["researcher"])).get(f"/api/v1/corrections/{response.json()['id']}").json()
    assert got["replayed"] is False and got["replay"]["state"] == "stored as edited"
    assert "differently" in got["replay"]["note"]


@pytest.mark.parametrize(
    "body",
    [
        [],
        "fix",
        {"side": "middle", "kind": "answer", "answer": "x"},
        {"side": "left"},
        {"side": "left", "kind": "answer"},
        {"side": "left", "kind": "answer", "answer": ["x"]},
        {"side": "left", "kind": "answer", "answer": "x", "step": 0},
        {"side": "left", "kind": "tool_call", "step": "0", "calls": [{"tool": "search", "arguments": {"query": "x"}}]},
        {"side": "left", "kind": "tool_call", "step": 99, "calls": [{"tool": "search", "arguments": {"query": "x"}}]},
        {"side": "left", "kind": "tool_call", "step": 0, "calls": {}},
        {"side": "left", "kind": "tool_call", "step": 0, "calls": []},
        {"side": "left", "kind": "tool_call", "step": 0, "calls": [5]},
        {"side": "left", "kind": "tool_call", "step": 0, "calls": [{"tool": 5}]},
        {
            "side": "left",
            "kind": "tool_call",
            "step": 0,
            "calls": [{"tool": "search", "arguments": {"query": "x"}, "observation": {}}],
        },
        {"side": "left", "kind": "tool_call", "step": 1, "calls": [{"tool": "search", "arguments": {"query": "x"}}]},
        {"side": "left", "kind": "answer", "answer": "x", "colour": "red"},
    ],
)
def test_bad_bodies_are_refused_with_a_reason_and_nothing_stored(annotator, body):
    assignment = _plain_assignment(annotator, environment="")
    response = token_client(annotator).post(f"/api/v1/assignments/{assignment.pk}/correction", body, format="json")
    assert response.status_code == 400, (body, response.content)
    assert response.json()["detail"] and not Correction.objects.exists()


def test_only_the_assignments_annotator_corrects_and_admins_review(annotator):
    assignment = _plain_assignment(annotator, environment="")
    other = UserFactory(roles=["annotator"])
    body = {"side": "right", "kind": "answer", "answer": "better"}
    assert (
        token_client(other).post(f"/api/v1/assignments/{assignment.pk}/correction", body, format="json").status_code
        == 400
    )
    created = (
        token_client(annotator).post(f"/api/v1/assignments/{assignment.pk}/correction", body, format="json").json()
    )
    review = f"/api/v1/corrections/{created['id']}/review"
    assert token_client(annotator).post(review, {"decision": "accept"}, format="json").status_code == 403
    researcher, admin = UserFactory(roles=["researcher"]), UserFactory(roles=["admin"])
    listed = token_client(researcher).get("/api/v1/corrections/?status=pending").json()["results"]
    assert [c["id"] for c in listed] == [created["id"]] and listed[0]["author"] != annotator.username
    assert token_client(researcher).post(review, {"decision": "accept"}, format="json").status_code == 403
    admin_api = token_client(admin)
    assert admin_api.post(review, {"decision": "maybe"}, format="json").status_code == 400
    reviewed = admin_api.post(review, {"decision": "accept", "note": "right answer"}, format="json").json()
    assert reviewed["status"] == "accepted" and reviewed["review_note"] == "right answer"
    assert admin_api.get("/api/v1/corrections/?status=bogus").status_code == 400
    # A lease that ran out holds nothing to correct.
    Assignment.objects.filter(pk=assignment.pk).update(status=Assignment.Status.EXPIRED)
    assert (
        token_client(annotator).post(f"/api/v1/assignments/{assignment.pk}/correction", body, format="json").status_code
        == 400
    )


def test_the_screens_form_reads_as_the_api_does_and_says_why_it_refuses(annotator, client):
    assignment = _plain_assignment(annotator, environment="")
    client.force_login(annotator)
    url = f"/annotate/assignments/{assignment.pk}/correction/"
    bad = {
        "side": "left",
        "kind": "tool_call",
        "step": "0",
        "tool": "search",
        "arguments": "{not json",
        "observation": "",
    }
    response = client.post(url, bad, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and b'id="correction-refused"' in response.content
    assert b"calls[0].arguments" in response.content and not Correction.objects.exists()
    good = {**bad, "arguments": '{"query": "the page"}', "observation": "the page", "answer": "fixed"}
    response = client.post(url, good, HTTP_HX_REQUEST="true")
    assert b'id="correction-stored"' in response.content and b"as edited" in response.content
    fix = Correction.objects.get()
    assert fix.corrected.steps[-1] == {"kind": "answer", "text": "fixed"} and fix.replayed is False
    response = client.post(
        url, {"side": "right", "kind": "answer", "answer": "also fixed"}
    )  # no htmx: back to the page
    assert response.status_code == 302 and Correction.objects.count() == 2


def test_admins_review_on_the_corrections_page_and_researchers_read_it(annotator, client):
    assignment = _plain_assignment(annotator, environment="")
    made = [
        token_client(annotator)
        .post(
            f"/api/v1/assignments/{assignment.pk}/correction",
            {"side": side, "kind": "answer", "answer": "x"},
            format="json",
        )
        .json()["id"]
        for side in ("left", "right")
    ]
    researcher, admin = UserFactory(roles=["researcher"]), UserFactory(roles=["admin"])
    client.force_login(researcher)
    listing = client.get("/annotate/corrections/")
    assert listing.status_code == 200 and f"#{made[0]}".encode() in listing.content
    assert client.post(f"/annotate/corrections/{made[0]}/", {"decision": "accept"}).status_code == 403
    client.force_login(admin)
    page = client.get(f"/annotate/corrections/{made[0]}/")
    assert page.status_code == 200 and b'id="review-form"' in page.content
    response = client.post(f"/annotate/corrections/{made[0]}/", {"decision": "accept", "note": "good"})
    assert response.status_code == 302 and response["Location"].endswith(f"/annotate/corrections/{made[1]}/")
    assert Correction.objects.get(pk=made[0]).status == "accepted"
    client.post(f"/annotate/corrections/{made[1]}/", {"decision": "sideways"})
    assert Correction.objects.get(pk=made[1]).status == "pending"
    client.force_login(annotator)
    assert client.get("/annotate/corrections/").status_code in (302, 403)


def test_an_environment_that_fails_while_playing_keeps_the_fix_as_edited(annotator, monkeypatch):
    from training.envs.replay import EnvironmentReplayer

    def broken(self, task, prefix, calls, answer):
        raise RuntimeError("the tool server went away")

    monkeypatch.setattr(EnvironmentReplayer, "replay", broken)
    assignment = _encyclopedia_assignment(annotator)
    body = {"side": "left", "kind": "answer", "answer": "kept anyway"}
    response = token_client(annotator).post(f"/api/v1/assignments/{assignment.pk}/correction", body, format="json")
    assert response.status_code == 201, response.content
    replays_run()
    got = token_client(UserFactory(roles=["researcher"])).get(f"/api/v1/corrections/{response.json()['id']}").json()
    assert got["replayed"] is False and "went away" in got["replay"]["note"]


def test_a_tool_call_fixed_in_an_mcp_environment_is_replayed_over_stdio(settings, tmp_path):
    """The calculator MCP server, started over stdio as a deployment configures it: the wrong call
    replaced by the right one, its observation the server's own, the answer scored by the rubric."""
    from annotate.services.corrections import CallIn, CorrectionIn, correction_create
    from annotate.services.imports import trajectories_import_objects
    from tests.helpers import calculator_environments
    from training.envs import services
    from training.envs.arithmetic import ArithmeticEnvironment
    from training.envs.base import EpisodeRunner
    from training.envs.replay import EnvironmentReplayer

    settings.ARBITER_ENVIRONMENTS = calculator_environments(tmp_path)
    try:
        env = services.environment_get("calc-stdio")
        task = env.tasks("train")[0]
        episode = EpisodeRunner(env).start(task)
        episode.call("calculate", {"expression": "1 + 1"}, call_id="c0")
        episode.call("answer", {"text": "2"})
        report = trajectories_import_objects(objects=[episode.trajectory(agent="calc-agent")])
        original = Trajectory.objects.get(pk=report.trajectory_ids[0])
        assert original.task.environment == "calc-stdio" and original.outcome["correct"] is False
        expressions = {
            t.external_id: t.metadata["expression"] for t in ArithmeticEnvironment(seed=11, n_tasks=60).tasks("train")
        }
        expression = expressions[task.external_id]  # the sum the task asks for, as a person works it out
        fix = CorrectionIn(
            kind="tool_call", step=0, calls=[CallIn("calculate", {"expression": expression})], answer=task.reference
        )
        correction, note = correction_create(
            original=original, correction=fix, author=UserFactory(), replayer=EnvironmentReplayer()
        )
    finally:
        for built in list(services._built.values()):
            built.close()
        services._built.clear()
    assert correction.replayed and note == ""
    steps = correction.corrected.steps
    observation = next(s for s in steps if s["kind"] == "observation")
    assert observation["tool"] == "calculate" and task.reference in observation["content"]  # the server's answer
    assert correction.corrected.answer == task.reference and correction.corrected.outcome["correct"] is True


def test_a_correction_that_changes_nothing_is_refused_with_the_reason(annotator):
    """The original's own answer (replayed in the encyclopedia to the same episode) is a no-op: it
    is refused, naming why, and nothing is stored or queued for review (issue 44)."""
    assignment = _encyclopedia_assignment(annotator)
    original = _side(assignment, "left")
    api = token_client(annotator)
    response = api.post(
        f"/api/v1/assignments/{assignment.pk}/correction",
        {"side": "left", "kind": "answer", "answer": original.answer},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "the same as the original" in response.json()["detail"] and not Correction.objects.exists()


def test_calls_may_go_before_the_answer_and_an_unchanged_call_is_a_no_op(annotator):
    """Issue 44: the commonest fix is a call missing before the answer: a tool-call correction
    from the answer step keeps every step before it, plays the calls, then the answer. The
    original's last call given back unchanged (only its call id differs) is refused as a no-op.
    A step that is neither a call nor the answer is refused, naming what it is."""
    assignment = _encyclopedia_assignment(annotator)
    original = _side(assignment, "left")
    steps = original.steps
    answer_at = next(i for i, s in enumerate(steps) if s["kind"] == "answer")
    last_call = max(i for i, s in enumerate(steps) if s["kind"] == "action")
    url = f"/api/v1/assignments/{assignment.pk}/correction"
    api = token_client(annotator)
    same = {"tool": steps[last_call]["tool"], "arguments": steps[last_call]["arguments"]}
    unchanged = {"side": "left", "kind": "tool_call", "step": last_call, "calls": [same], "answer": original.answer}
    response = api.post(url, unchanged, format="json")
    assert response.status_code == 400 and "the same as the original" in response.json()["detail"]
    observation = next(i for i, s in enumerate(steps) if s["kind"] == "observation")
    response = api.post(url, {**unchanged, "step": observation}, format="json")
    assert response.status_code == 400 and "neither a tool call nor the answer" in response.json()["detail"]
    assert not Correction.objects.exists()

    inserted = {
        "side": "left",
        "kind": "tool_call",
        "step": answer_at,
        "calls": [{"tool": "find", "arguments": {"text": "born"}}],
    }
    response = api.post(url, {**inserted, "answer": original.answer}, format="json")
    assert response.status_code == 201, response.content
    replays_run()
    corrected = Correction.objects.get(pk=response.json()["id"]).corrected
    assert corrected.steps[:answer_at] == steps[:answer_at]
    assert corrected.steps[answer_at]["tool"] == "find" and corrected.steps[answer_at + 1]["kind"] == "observation"
    assert corrected.steps[-1] == {"kind": "answer", "text": original.answer} and corrected.answer == original.answer


@pytest.mark.parametrize("step", ["²", "٣", " 7", "1.0", "-1", "9" * 30, "0x1"])
def test_the_forms_step_is_read_as_ascii_digits_and_refused_with_a_reason(annotator, client, step):
    """`"²".isdigit()` is true and `int("²")` raises: the form's step goes through the one
    index reader (core.ids.parse_index), and a bad one is refused, never a 500."""
    assignment = _plain_assignment(annotator, environment="")
    client.force_login(annotator)
    body = {"side": "left", "kind": "tool_call", "step": step, "tool": "search", "arguments": '{"query": "x"}'}
    response = client.post(f"/annotate/assignments/{assignment.pk}/correction/", body, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and b'id="correction-refused"' in response.content
    assert b"<code>step</code>" in response.content and not Correction.objects.exists()


def test_the_lowest_role_cannot_fill_the_disk_with_corrections(annotator, settings):
    """Issue 45: one call's arguments, the body, corrections per side and per hour are bounded,
    each refused with the reason and nothing stored."""
    assignment = _plain_assignment(annotator, environment="")
    api = token_client(annotator)
    url = f"/api/v1/assignments/{assignment.pk}/correction"
    huge = {"query": "x" * 1_400_000}
    call = {"tool": "search", "arguments": huge, "observation": "found"}
    response = api.post(url, {"side": "left", "kind": "tool_call", "step": 0, "calls": [call]}, format="json")
    assert response.status_code == 413 and "at most 1,000,000 bytes" in response.json()["detail"]
    big = {"tool": "search", "arguments": {"query": "x" * 30_000}, "observation": "found"}
    response = api.post(url, {"side": "left", "kind": "tool_call", "step": 0, "calls": [big]}, format="json")
    assert response.status_code == 400 and "calls[0].arguments" in str(response.json())
    assert not Correction.objects.exists()

    settings.CORRECTIONS_PER_SIDE, settings.CORRECTIONS_PER_HOUR = 2, 3
    for n in range(2):
        body = {"side": "left", "kind": "answer", "answer": f"fix {n}"}
        assert api.post(url, body, format="json").status_code == 201
    refused = api.post(url, {"side": "left", "kind": "answer", "answer": "fix 3"}, format="json")
    assert refused.status_code == 400 and "corrections of this side already" in refused.json()["detail"]
    assert api.post(url, {"side": "right", "kind": "answer", "answer": "other side"}, format="json").status_code == 201
    refused = api.post(url, {"side": "right", "kind": "answer", "answer": "again"}, format="json")
    assert refused.status_code == 400 and "in the last hour" in refused.json()["detail"]
    assert Correction.objects.count() == 3


@pytest.mark.parametrize("how", ["archived", "closed", "out of the pool"])
def test_corrections_are_refused_where_judgements_are(annotator, how):
    """Issue 45: an archived or closed campaign, or an annotator taken out of its pool, stores no
    correction (as a judgement is refused), with the reason."""
    assignment = _plain_assignment(annotator, environment="")
    campaign = assignment.comparison.campaign
    if how == "out of the pool":
        campaign.pool_only = True
        campaign.save()
        campaign.pool.add(UserFactory(roles=["annotator"]))
    else:
        campaign.status = how
        campaign.save()
    response = token_client(annotator).post(
        f"/api/v1/assignments/{assignment.pk}/correction",
        {"side": "left", "kind": "answer", "answer": "late"},
        format="json",
    )
    assert 400 <= response.status_code < 500 and "was not stored" in response.json()["detail"]
    assert not Correction.objects.exists()


def test_the_review_page_says_a_replay_is_waiting_and_reviews_it_once_played(annotator, client):
    """Issue 45: a correction whose replay waits for a worker says so on the review pages, and an
    admin's decision is refused (with the reason) until the worker has played it."""
    assignment = _encyclopedia_assignment(annotator, seed=5)  # its first comparison has a wrong side
    side = next(
        s for s in ("left", "right") if _side(assignment, s).answer != _side(assignment, s).task.reference_answer
    )
    made = (
        token_client(annotator)
        .post(
            f"/api/v1/assignments/{assignment.pk}/correction",
            {"side": side, "kind": "answer", "answer": _side(assignment, side).task.reference_answer},
            format="json",
        )
        .json()
    )
    state = f"/annotate/corrections/{made['id']}/state/"  # what the labeling screen polls
    client.force_login(annotator)
    assert b"being played in encyclopedia on a worker (queued)" in client.get(state).content
    client.force_login(UserFactory(roles=["annotator"]))
    assert client.get(state).status_code == 404  # only its author's
    client.force_login(UserFactory(roles=["admin"]))
    assert b"being played in encyclopedia on a worker (queued)" in client.get("/annotate/corrections/").content
    page = client.get(f"/annotate/corrections/{made['id']}/")
    assert b"being played in encyclopedia on a worker (queued)" in page.content
    response = client.post(f"/annotate/corrections/{made['id']}/", {"decision": "accept"}, follow=True)
    assert b"still being played" in response.content and Correction.objects.get().status == "pending"
    replays_run()
    assert b"played in the environment" in client.get(f"/annotate/corrections/{made['id']}/").content
    client.post(f"/annotate/corrections/{made['id']}/", {"decision": "accept"})
    assert Correction.objects.get().status == "accepted"
