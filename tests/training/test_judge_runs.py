"""Chat judges (issue 32) as users run them: created over the API with a key that is never shown
back, run over a campaign against an OpenAI-compatible server (a scripted one here, on
127.0.0.1), every call kept for audit, the cost cap stopping a run that a resume finishes, and
the same run on a real Celery worker."""

from __future__ import annotations

import json
import socket
import time

import pytest

from annotate.models import Judge, JudgeCall, JudgeVote
from tests.conftest import token_client, wait_for
from tests.factories import UserFactory
from tests.fake_openai import ok, refuse, start_fake_openai
from tests.training.judge_fixtures import judge_run, rubric_campaign
from webapp.models import Run
from webapp.runs.services import run_execute

KEY = "sk-test-0123456789abcdef"
VERDICT = {
    "rationale": "A answers from the page it opened.",
    "verdict": "A better",
    "both_bad": False,
    "ratings": {},
    "first_wrong_step_a": None,
    "first_wrong_step_b": 0,
}


@pytest.fixture
def server(request):
    fake, stop = start_fake_openai()
    fake.default = ok(VERDICT, usage={"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100})
    request.addfinalizer(stop)
    return fake


@pytest.fixture
def admin():
    return UserFactory(roles=["admin"])


def _chat_judge(api, server, **config) -> dict:
    body = {
        "name": "chat-judge",
        "kind": "chat",
        "config": {"base_url": server.url, "model": "judge-1", "requests_per_minute": 0, "backoff_s": 0.01, **config},
        "api_key": KEY,
    }
    response = api.post("/api/v1/judges/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


@pytest.mark.django_db
def test_a_chat_judge_votes_and_every_call_is_kept_without_the_key(admin, server):
    api = token_client(admin)
    judge = _chat_judge(api, server)
    assert judge["api_key_source"] == "stored" and KEY not in json.dumps(judge)
    assert KEY not in Judge.objects.get(pk=judge["id"]).secret  # stored encrypted
    campaign = rubric_campaign(n=4, guidelines="Prefer answers quoted from the page.")
    run = judge_run(admin, judge_id=judge["id"], campaign_id=campaign.pk, swapped_share=1.0, repeat_share=0.0)
    assert run.status == "succeeded", run.error + run.log
    # Asked A-first, then B-first: a judge that always says "A better" prefers whatever it is shown first.
    assert set(JudgeVote.objects.filter(probe="first").values_list("choice", flat=True)) == {2}
    assert set(JudgeVote.objects.filter(probe="swapped").values_list("choice", flat=True)) == {4}
    assert JudgeVote.objects.filter(probe="first").first().first_wrong_step_b == 0
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    calls = JudgeCall.objects.filter(run_id=run.pk)
    assert calls.count() == 8 and set(calls.values_list("status", flat=True)) == {"ok"}
    call = calls.first()
    assert "Prefer answers quoted from the page." in json.dumps(call.request["messages"])
    assert call.cost_usd == 0 and call.prompt_tokens == 1000
    audit = api.get(f"/api/v1/judges/{judge['id']}/calls?run={run.pk}").json()
    assert len(audit["results"]) == 8 and KEY not in json.dumps(audit)
    panel = api.get(f"/api/v1/campaigns/{campaign.pk}/judge-agreement").json()["judges"][0]
    assert panel["position_bias"]["flip_rate"]["value"] == 1.0
    assert panel["position_bias"]["first_shown_rate"]["value"] == 1.0


@pytest.mark.django_db
def test_the_cost_cap_stops_a_run_that_a_resume_finishes_without_asking_twice(admin, server):
    api = token_client(admin)
    # $1 per million tokens in, $10 out: 1000 + 100 tokens cost $0.002 a call; the cap allows two.
    judge = _chat_judge(
        api, server, price_input_per_mtok=1.0, price_output_per_mtok=10.0, max_cost_usd=0.004, concurrency=1
    )
    campaign = rubric_campaign(n=5)
    run = judge_run(admin, judge_id=judge["id"], campaign_id=campaign.pk, swapped_share=0, repeat_share=0)
    assert run.status == "failed" and "cost cap" in run.error, run.error
    stored = JudgeVote.objects.count()
    assert stored == 2 and JudgeCall.objects.filter(run_id=run.pk).count() == 2
    raised = api.patch(f"/api/v1/judges/{judge['id']}", {"config": {"max_cost_usd": 1.0}}, format="json")
    assert raised.status_code == 200 and raised.json()["config"]["base_url"] == server.url  # the rest is kept
    assert api.post(f"/api/v1/runs/{run.pk}/resume").status_code in (200, 202)
    run.refresh_from_db()
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    assert JudgeVote.objects.count() == 5 and len(server.requests) == 5  # nothing asked twice
    assert run.summary["spent_usd"] == pytest.approx(0.010)


@pytest.mark.django_db
def test_retries_and_answers_that_are_not_verdicts_are_recorded_and_never_stored(admin, server):
    api = token_client(admin)
    judge = _chat_judge(api, server, max_retries=1, concurrency=1)
    campaign = rubric_campaign(n=2)
    bad_step = {**VERDICT, "first_wrong_step_b": 99}  # B has 3 steps: the campaign's rules refuse it
    server.script = [refuse(429, "slow down", retry_after="0"), ok(VERDICT), ok(bad_step)]
    run = judge_run(admin, judge_id=judge["id"], campaign_id=campaign.pk, swapped_share=0, repeat_share=0)
    assert run.status == "succeeded" and run.summary["voted"] == 1 and run.summary["failed"] == 1
    statuses = list(JudgeCall.objects.order_by("id").values_list("status", "http_status"))
    assert statuses == [("error", 429), ("ok", 200), ("invalid", 200)]
    refused = JudgeCall.objects.order_by("id").last()
    assert "first wrong step on the right" in refused.error


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        [],
        "judge",
        {"name": "j", "kind": "chat"},
        {"name": "j", "kind": "oracle", "config": {}},
        {"name": 7, "kind": "rubric"},
        {"name": "j", "kind": "rubric", "config": []},
        {"name": "j", "kind": "rubric", "config": {"x": 1}},
        {"name": "j", "kind": "chat", "config": {"base_url": 5, "model": "m"}},
        {"name": "j", "kind": "chat", "config": {"base_url": "ftp://x/v1", "model": "m"}},
        {"name": "j", "kind": "chat", "config": {"base_url": "http://127.0.0.1:1/v1", "model": ["m"]}},
        {
            "name": "j",
            "kind": "chat",
            "config": {"base_url": "http://127.0.0.1:1/v1", "model": "m", "temperature": "hot"},
        },
        {"name": "j", "kind": "chat", "config": {"base_url": "http://127.0.0.1:1/v1", "model": "m", "concurrency": 0}},
        {
            "name": "j",
            "kind": "chat",
            "config": {"base_url": "http://127.0.0.1:1/v1", "model": "m", "max_cost_usd": {}},
        },
        {"name": "j", "kind": "chat", "config": {"base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key": "k"}},
        {
            "name": "j",
            "kind": "chat",
            "config": {"base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": "A B"},
        },
        {"name": "j", "kind": "chat", "config": {"base_url": "http://127.0.0.1:1/v1", "model": "m"}, "api_key": 5},
        {"name": "j", "kind": "rubric", "api_key": "k"},
        {"name": "j", "kind": "reward_model", "config": {"reward_model_id": "1"}},
        {"name": "j", "kind": "reward_model", "config": {"reward_model_id": 987654}},
        {"name": "j", "kind": "rubric", "extra": True},
    ],
)
def test_a_bad_judge_is_refused_with_a_json_reason_and_nothing_is_stored(admin, body):
    response = token_client(admin).post("/api/v1/judges/", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["detail"] and not Judge.objects.exists()


@pytest.mark.django_db
def test_only_admins_change_judges_and_a_judge_with_votes_is_kept(admin, server):
    researcher = UserFactory(roles=["researcher"])
    judge = _chat_judge(token_client(admin), server)
    api = token_client(researcher)
    assert api.get(f"/api/v1/judges/{judge['id']}").status_code == 200
    assert api.post("/api/v1/judges/", {"name": "x", "kind": "rubric"}, format="json").status_code == 403
    assert api.get(f"/api/v1/judges/{judge['id']}/calls").status_code == 403
    admin_api = token_client(admin)
    assert admin_api.patch(f"/api/v1/judges/{judge['id']}", {"kind": "rubric"}, format="json").status_code == 400
    campaign = rubric_campaign(n=1)
    judge_run(admin, judge_id=judge["id"], campaign_id=campaign.pk, swapped_share=0)
    response = admin_api.delete(f"/api/v1/judges/{judge['id']}")
    assert response.status_code == 400 and "votes" in response.json()["detail"]
    removed = admin_api.patch(f"/api/v1/judges/{judge['id']}", {"api_key": ""}, format="json").json()
    assert removed["api_key_source"] == "none"


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_chat_judge_run_on_a_real_worker_votes_over_http(celery_worker_process, admin, server):
    api = token_client(admin)
    judge = _chat_judge(api, server)
    campaign = rubric_campaign(n=3)
    response = api.post(
        "/api/v1/runs/",
        {"kind": "judge", "config": {"judge_id": judge["id"], "campaign_id": campaign.pk, "then_order": True}},
        format="json",
    )
    assert response.status_code == 201, response.content
    run_id = response.json()["id"]
    body = wait_for(
        lambda: (b := api.get(f"/api/v1/runs/{run_id}").json())["status"] not in ("queued", "running") and b,
        timeout=120,
    )
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    assert JudgeVote.objects.filter(judge_id=judge["id"], probe="first").count() == 3
    assert any(link["type"] == "judge" for link in body["lineage"])
    assert len(server.requests) >= 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_cancelled_judge_run_keeps_what_it_paid_for_and_a_resume_asks_only_the_rest(
    celery_worker_process, admin, server
):
    api = token_client(admin)
    judge = _chat_judge(api, server, concurrency=1)
    server.default = {**server.default, "delay": 0.4}
    campaign = rubric_campaign(n=10)
    config = {"judge_id": judge["id"], "campaign_id": campaign.pk, "swapped_share": 0, "repeat_share": 0}
    run_id = api.post("/api/v1/runs/", {"kind": "judge", "config": config}, format="json").json()["id"]
    wait_for(lambda: JudgeVote.objects.filter(judge_id=judge["id"]).count() >= 2, timeout=60)
    assert api.post(f"/api/v1/runs/{run_id}/cancel").status_code in (200, 202)
    body = wait_for(
        lambda: (b := api.get(f"/api/v1/runs/{run_id}").json())["status"] not in ("queued", "running") and b,
        timeout=60,
    )
    assert body["status"] == "cancelled", body
    kept = JudgeVote.objects.filter(judge_id=judge["id"]).count()
    assert 2 <= kept < 10 and JudgeCall.objects.filter(run_id=run_id).count() == len(server.requests) == kept

    assert api.post(f"/api/v1/runs/{run_id}/resume").status_code in (200, 202)
    body = wait_for(
        lambda: (b := api.get(f"/api/v1/runs/{run_id}").json())["status"] in ("succeeded", "failed") and b,
        timeout=60,
    )
    assert body["status"] == "succeeded", body["error"]
    assert JudgeVote.objects.filter(judge_id=judge["id"]).count() == 10 == len(server.requests)  # none asked twice


@pytest.mark.django_db
def test_a_run_whose_every_call_failed_fails_with_the_first_reason_and_the_runs_list_says_so(admin, server):
    """A judge run that stored nothing did not succeed: it fails with why, never "succeeded, 100%"."""
    api = token_client(admin)
    judge = _chat_judge(api, server, max_retries=0, concurrency=1)
    campaign = rubric_campaign(n=3)
    server.script = [refuse(400, "This model's maximum context length is 4096 tokens")] * 3  # each item's own
    run = judge_run(admin, judge_id=judge["id"], campaign_id=campaign.pk, swapped_share=0, repeat_share=0)
    assert run.status == "failed", (run.status, run.summary)
    assert "No vote was stored: 3 of the 3 answers asked failed" in run.error and "400" in run.error, run.error
    assert not JudgeVote.objects.exists() and JudgeCall.objects.filter(run_id=run.pk).count() == 3
    listed = api.get("/api/v1/runs/").json()["results"][0]
    assert listed["id"] == run.pk and listed["status"] == "failed"


@pytest.mark.django_db
def test_a_run_gives_up_at_the_first_401_with_one_line_at_the_progress_it_reached(admin, server):
    """A wrong key fails every call alike: the run stops at the first, says why in one line, and
    shows how far it got (1 of 10), never 100%."""
    api = token_client(admin)
    judge = _chat_judge(api, server, concurrency=1)
    campaign = rubric_campaign(n=10)
    server.default = refuse(401, f"Incorrect API key provided: {KEY}")
    run = judge_run(admin, judge_id=judge["id"], campaign_id=campaign.pk, swapped_share=0, repeat_share=0)
    assert run.status == "failed" and len(server.requests) == 1
    assert run.error.startswith(f"Gave up: The endpoint {server.url} answered HTTP 401"), run.error
    assert "1 question was asked and no vote was stored" in run.error and "resume" in run.error
    assert "\n" not in run.error and "Traceback" not in run.error + run.log and KEY not in run.error + run.log
    assert run.progress == pytest.approx(0.1)


@pytest.mark.django_db
def test_a_streak_of_server_errors_stops_the_run_and_keeps_the_votes_before_it(admin, server):
    api = token_client(admin)
    judge = _chat_judge(api, server, concurrency=1, max_retries=4, max_failures_in_a_row=5)
    campaign = rubric_campaign(n=10)
    server.script = [ok(VERDICT), ok(VERDICT)]  # then the default: the server breaks
    server.default = refuse(500, "CUDA out of memory")
    run = judge_run(admin, judge_id=judge["id"], campaign_id=campaign.pk, swapped_share=0, repeat_share=0)
    assert run.status == "failed" and len(server.requests) == 2 + 5
    assert f"The endpoint {server.url} answered HTTP 500 (CUDA out of memory) on 5 calls in a row" in run.error
    assert "3 questions were asked and the 2 votes stored are kept" in run.error, run.error
    # The third used its five attempts (so it is done, and failed); the seven others were never asked.
    assert JudgeVote.objects.filter(judge_id=judge["id"]).count() == 2 and run.progress == pytest.approx(0.3)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_judge_run_against_a_dead_endpoint_fails_in_seconds_on_a_real_worker(celery_worker_process, admin, client):
    """Issue 53: every call of a judge whose server is down used to be tried five times (66
    answers, six minutes) before the run failed at "100%" with a traceback. At the judge's
    default settings, against a port nobody listens on, it fails within 30 s, with the reason."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    api = token_client(admin)
    body = {"name": "down", "kind": "chat", "config": {"base_url": dead, "model": "judge-1"}}
    judge = api.post("/api/v1/judges/", body, format="json").json()
    campaign = rubric_campaign(n=22)  # 22 comparisons and their probes, as the run
    config = {"judge_id": judge["id"], "campaign_id": campaign.pk}
    started = time.monotonic()
    run_id = api.post("/api/v1/runs/", {"kind": "judge", "config": config}, format="json").json()["id"]
    body = wait_for(
        lambda: (b := api.get(f"/api/v1/runs/{run_id}").json())["status"] not in ("queued", "running") and b,
        timeout=60,
    )
    took = time.monotonic() - started
    assert body["status"] == "failed" and took < 30, (body["status"], took)
    assert body["error"].startswith(f"Gave up: The endpoint {dead} refused the connection on 5 calls in a row")
    log = Run.objects.get(pk=run_id).log
    assert body["progress"] < 0.5 and "\n" not in body["error"] and "Traceback" not in body["error"] + log
    assert JudgeCall.objects.filter(run_id=run_id).count() == 5
    client.force_login(admin)
    page = client.get(f"/runs/{run_id}/").content.decode()
    assert "refused the connection on 5 calls in a row" in page and "Traceback" not in page
