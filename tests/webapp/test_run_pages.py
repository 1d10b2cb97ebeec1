"""Run pages and API against every role; the launch form; live polling that stops at the end; the
charts, result table and artifact downloads of a run's page."""

import re
from pathlib import Path

import pytest

from annotate.models import Policy
from tests.conftest import token_client
from webapp.models import Run, RunMetric

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_queue(monkeypatch):
    monkeypatch.setattr("webapp.runs.services._enqueue", lambda run: None)


@pytest.fixture
def run(admin_user):
    run = Run.objects.create(
        kind="rollout",
        name="r",
        status="running",
        created_by=admin_user,
        attempt=1,
        config={"policy_id": 1},
        lineage=[{"direction": "input", "type": "policy", "id": 1, "label": "tiny@1", "url": "/training/policies/1/"}],
    )
    RunMetric.objects.create(run=run, step=1, values={"loss/train": 2.0, "loss/eval": 2.5})
    RunMetric.objects.create(run=run, step=2, values={"loss/train": 1.0})
    return run


PAGES = ["/runs/", "/runs/{id}/", "/training/policies/"]


@pytest.mark.parametrize("url", PAGES)
def test_run_pages_by_role(client, role_users, run, url):
    url = url.format(id=run.pk)
    assert client.get(url).status_code == 302  # anonymous: to the login page
    for role, expected in (("annotator", 403), ("researcher", 200), ("admin", 200)):
        client.force_login(role_users[role])
        assert client.get(url).status_code == expected, (role, url)


def test_launch_cancel_and_resume_are_for_admins_only(client, api_client_for, role_users, run):
    for role in ("annotator", "researcher"):
        client.force_login(role_users[role])
        assert client.get("/runs/new/rollout/").status_code == 403
        assert client.post(f"/runs/{run.pk}/cancel").status_code == 403
        assert client.post(f"/runs/{run.pk}/resume").status_code == 403
        api = api_client_for(role)
        assert api.post("/api/v1/runs/", {"kind": "rollout"}, format="json").status_code == 403
        assert api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 403
        assert api.post(f"/api/v1/runs/{run.pk}/resume").status_code == 403
    assert api_client_for("annotator").get(f"/api/v1/runs/{run.pk}").status_code == 403
    assert api_client_for("researcher").get(f"/api/v1/runs/{run.pk}").json()["metrics"]["loss/train"] == [
        [1, 2.0],
        [2, 1.0],
    ]
    assert Run.objects.get(pk=run.pk).status == "running"


@pytest.fixture
def api_client_for(role_users):
    return lambda role: token_client(role_users[role])


def test_the_run_page_polls_while_active_and_stops_when_done(client, admin_user, run):
    client.force_login(admin_user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'hx-trigger="every 2s"' in page and "tiny@1" in page and "<svg" in page and "Cancel" in page
    assert client.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true").status_code == 200
    Run.objects.filter(pk=run.pk).update(status="succeeded", progress=1.0)
    fragment = client.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 286 and "hx-trigger" not in fragment.content.decode()


def test_cancel_from_the_page_asks_the_running_job_to_stop(client, admin_user, run):
    client.force_login(admin_user)
    client.post(f"/runs/{run.pk}/cancel")
    assert Run.objects.get(pk=run.pk).cancel_requested


def test_the_launch_form_refuses_a_bad_config_with_the_reason_and_queues_nothing(client, admin_user, tmp_path):
    client.force_login(admin_user)
    form = client.get("/runs/new/rollout/").content.decode()
    assert "Samples per task" in form and "episodes per task" in form  # label and help text
    missing = client.post(
        "/runs/new/rollout/",
        {
            "idempotency_key": "a",
            "policy_id": "",
            "environment": "encyclopedia",
            "split": "train",
            "tasks": 5,
            "samples_per_task": 1,
            "temperature": -1,
            "campaign_id": 0,
            "seed": 0,
        },
    )
    assert missing.status_code == 400 and not Run.objects.filter(kind="rollout", name="x").exists()
    (tmp_path / "config.json").write_text("{}")
    policy = Policy.objects.create(name="p", model_dir=str(tmp_path))
    bad = client.post(
        "/runs/new/rollout/",
        {
            "idempotency_key": "b",
            "name": "x",
            "policy_id": policy.pk,
            "environment": "encyclopedia",
            "split": "train",
            "tasks": 5,
            "samples_per_task": 1,
            "temperature": -1,
            "campaign_id": 0,
            "seed": 0,
        },
    )
    assert bad.status_code == 400 and "temperature: 0 (greedy) or more" in bad.content.decode()
    assert not Run.objects.filter(name="x").exists()
    ok = {
        "idempotency_key": "c",
        "name": "x",
        "policy_id": policy.pk,
        "environment": "encyclopedia",
        "split": "train",
        "tasks": 5,
        "samples_per_task": 1,
        "temperature": 1,
        "campaign_id": 0,
        "seed": 0,
    }
    first, second = client.post("/runs/new/rollout/", ok), client.post("/runs/new/rollout/", ok)  # double click
    assert first.status_code == second.status_code == 302 and first.url == second.url
    assert Run.objects.filter(name="x").count() == 1


def test_api_launch_refuses_bad_configs_with_reasons(admin_user):
    api = token_client(admin_user)
    response = api.post("/api/v1/runs/", {"kind": "rollout", "config": {"policy_id": 999, "tasks": 0}}, format="json")
    assert response.status_code == 400
    assert "tasks: at least 1." in response.json()["detail"]
    response = api.post("/api/v1/runs/", {"kind": "rollout", "config": {"policy_id": 999}}, format="json")
    assert response.status_code == 400 and "No policy with id 999" in response.json()["detail"]
    assert not Run.objects.filter(kind="rollout").exclude(name="r").exists()


# --- Charts, result and artifacts on the run page -------------------------------------------


def test_the_run_page_draws_one_chart_per_metric_grouped_by_namespace(client, researcher, run):
    RunMetric.objects.create(
        run=run, step=3, values={"objective/kl": 0.5, "train/num_tokens": 213456.0, "eval/accuracy": 0.8123}
    )
    client.force_login(researcher)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    charted = re.findall(r'<svg class="chart"[^>]*data-metric="([^"]+)"', page)
    assert sorted(charted) == ["eval/accuracy", "loss/eval", "loss/train", "objective/kl", "train/num_tokens"]
    namespaces = re.findall(r'<h3 class="namespace">([^<]+)</h3>', page)
    assert namespaces == ["objective/", "eval/", "loss/", "train/"]  # the reader's order, not the alphabet's
    assert "213,456" in page and "81.2%" in page  # readable numbers, a share as a percentage
    one_point = page[page.index('data-metric="eval/accuracy"') :]
    assert "<circle" in one_point[: one_point.index("</svg>")]  # a one-point series shows its point


def test_the_result_is_a_table_of_readable_rows(client, researcher, run, admin_user):
    Run.objects.filter(pk=run.pk).update(
        summary={
            "test": {"accuracy": 0.8123, "n": 40},
            "seconds": 93.27,
            "steps": [1, 2, 3],
            "reward_model_id": 7,
            "ok": True,
        }
    )
    client.force_login(researcher)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    result = page[page.index('id="result"') : page.index('id="lineage"')]
    rows = [
        (re.sub(r"<[^>]+>", "", k).strip(), re.sub(r"<[^>]+>", "", v).strip())
        for k, v in re.findall(r"<th[^>]*>(.*?)</th>\s*<td>(.*?)</td>", result, re.S)
    ]
    assert ("test › accuracy", "81.2%") in rows and ("seconds", "93.3 s") in rows and ("ok", "yes") in rows
    assert ("steps", "1, 2, 3") in rows and ("reward model id", "7") in rows
    assert 'href="/reward-models/7/"' in result


@pytest.fixture
def artifact_run(admin_user, settings):
    run = Run.objects.create(kind="ppo", name="with files", status="succeeded", created_by=admin_user, attempt=1)
    folder = Path(settings.VAR_DIR) / "runs" / str(run.pk)
    (folder / "ppo" / "checkpoints" / "iter-0001").mkdir(parents=True, exist_ok=True)
    (folder / "ppo" / "checkpoints" / "iter-0001" / "config.json").write_text('{"hidden": 32}')
    (folder / "report.json").write_text('{"ok": true}')
    (folder / "work").mkdir(exist_ok=True)
    (folder / "work" / "scratch.txt").write_text("not an artifact")
    secret = Path(settings.VAR_DIR) / "not-this-runs-file.txt"
    secret.write_text("outside the run's folder")
    (folder / "ppo" / "checkpoints" / "escape.txt").unlink(missing_ok=True)
    (folder / "ppo" / "checkpoints" / "escape.txt").symlink_to(secret)
    elsewhere = Path(settings.VAR_DIR) / "registry" / f"run{run.pk}-model"
    elsewhere.mkdir(parents=True, exist_ok=True)
    (elsewhere / "weights.bin").write_bytes(b"\0" * 10)
    Run.objects.filter(pk=run.pk).update(
        artifacts=[
            {"name": "report", "path": str(folder / "report.json"), "bytes": 12},
            {"name": "checkpoints", "path": str(folder / "ppo" / "checkpoints"), "bytes": 14},
            {"name": "model", "path": str(elsewhere), "bytes": 10},
        ]
    )
    run.refresh_from_db()
    return run


def test_an_artifact_file_downloads_from_the_run_page(client, researcher, artifact_run, settings):
    client.force_login(researcher)
    page = client.get(f"/runs/{artifact_run.pk}/").content.decode()
    artifacts = page[page.index('id="artifacts"') : page.index("<h2>Log</h2>")]
    links = re.findall(r'href="([^"]+)"', artifacts)
    assert links == [
        f"/runs/{artifact_run.pk}/artifacts/report.json",
        f"/runs/{artifact_run.pk}/artifacts/ppo/checkpoints/iter-0001/config.json",
    ]
    assert "Kept outside this run" in artifacts  # the registered model: no link, no path
    assert str(settings.VAR_DIR) not in page and "/registry/" not in page  # never a server path
    response = client.get(links[1])
    assert response.status_code == 200 and b"".join(response.streaming_content) == b'{"hidden": 32}'
    assert (
        response["Content-Disposition"].startswith("attachment;") and "config.json" in response["Content-Disposition"]
    )


def test_a_file_name_with_a_line_break_is_listed_without_a_link(client, researcher, artifact_run, settings):
    folder = Path(settings.VAR_DIR) / "runs" / str(artifact_run.pk) / "ppo" / "checkpoints"
    (folder / "odd\nname.txt").write_text("x")
    client.force_login(researcher)
    response = client.get(f"/runs/{artifact_run.pk}/")
    assert response.status_code == 200
    assert "odd\nname.txt" in response.content.decode() and "holds a control character" in response.content.decode()


def test_artifact_downloads_check_the_role(client, role_users, artifact_run):
    url = f"/runs/{artifact_run.pk}/artifacts/report.json"
    assert client.get(url).status_code == 302  # anonymous: to the login page
    client.force_login(role_users["annotator"])
    assert client.get(url).status_code == 403
    client.force_login(role_users["admin"])
    assert client.get(url).status_code == 200
    assert client.post(url).status_code == 405


@pytest.mark.parametrize(
    "name",
    [
        "../../not-this-runs-file.txt",  # out of the run's folder by ..
        "ppo/../../../not-this-runs-file.txt",
        "ppo/checkpoints/escape.txt",  # a link inside an artifact folder that points outside
        "work/scratch.txt",  # in the run's folder, but no artifact
        "ppo",  # a folder, not a file
        "nothing.txt",
        "%2e%2e/%2e%2e/not-this-runs-file.txt",
    ],
)
def test_artifact_downloads_refuse_anything_but_an_artifact_file_in_the_run_folder(
    client, researcher, artifact_run, name
):
    client.force_login(researcher)
    response = client.get(f"/runs/{artifact_run.pk}/artifacts/{name}")
    assert response.status_code == 404
    assert b"outside the run's folder" not in response.content


def test_an_artifact_recorded_outside_the_run_folder_is_not_served(researcher, artifact_run, settings):
    from webapp.runs.selectors import run_artifact_file

    elsewhere = Path(settings.VAR_DIR) / "registry" / f"run{artifact_run.pk}-model" / "weights.bin"
    assert elsewhere.exists()
    for name in (str(elsewhere), f"../../registry/run{artifact_run.pk}-model/weights.bin"):
        assert run_artifact_file(artifact_run, name) is None
    assert run_artifact_file(artifact_run, "report.json") is not None


# --- The launch form ----------------------------------------------------------------------------


def test_the_launch_form_picks_ids_from_lists_with_the_inputs_first(client, admin_user, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    policies = [Policy.objects.create(name=f"p{i}", model_dir=str(tmp_path)) for i in range(3)]
    ppo = Run.objects.create(kind="ppo", name="tuned", status="succeeded", created_by=admin_user)
    client.force_login(admin_user)
    page = client.get("/runs/new/evaluation/").content.decode()
    names = re.findall(r'<div class="field [^"]*" id="field-([a-z_]+)"', page)
    assert names[:4] == ["baseline_policy_id", "reward_model_id", "policy_ids", "rl_run_id"]
    assert re.search(r'<select name="baseline_policy_id"', page) and re.search(r'<select name="rl_run_id"', page)
    assert f'<option value="{ppo.pk}">#{ppo.pk} tuned (ppo, succeeded)</option>' in page
    boxes = re.findall(r'<input type="checkbox" name="policy_ids" value="(\d+)"', page)
    assert sorted(map(int, boxes)) == sorted(p.pk for p in policies)
    assert "data-filterable" in page and "separated by commas" not in page.split('id="field-policy_ids"')[1][:2000]
    assert '<input type="checkbox" name="greedy"' in page and 'class="check"' in page
    form = client.get("/runs/new/reward_model/").content.decode()
    assert re.findall(r'id="field-([a-z_]+)"', form)[0] == "snapshot_id"  # the snapshot first, not 17th


def test_the_launch_form_reports_every_problem_in_one_submit(client, admin_user, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    baseline = Policy.objects.create(name="base", model_dir=str(tmp_path))
    client.force_login(admin_user)
    response = client.post(
        "/runs/new/evaluation/",
        {
            "idempotency_key": "k1",
            "name": " ",
            "baseline_policy_id": baseline.pk,
            "reward_model_id": 0,
            "policy_ids": [baseline.pk],
            "rl_run_id": 0,
            "split": "eval",
            "environment": "encyclopedia",
            "seed": "abc",
            "samples": 0,
            "temperature": -1,
            "tasks": -2,
            "best_of_n": "4",
            "max_context": 1536,
            "max_action_tokens": 48,
        },
    )
    assert response.status_code == 400 and not Run.objects.filter(kind="evaluation").exists()
    page = response.content.decode()
    summary = page[page.index('id="error-summary"') : page.index("</ul>", page.index('id="error-summary"'))]
    for field, text in (
        ("seed", "Enter a whole number"),
        ("samples", "between 1 and 64"),
        ("temperature", "above 0"),
        ("tasks", "0 (all) or more"),
        ("name", "give the evaluation a name"),
    ):
        assert re.search(rf'<a href="#id_{field}">[^<]+</a>: {re.escape(text)}', summary), text  # listed, linked
        block = page[page.index(f'id="field-{field}"') :]
        assert text in block[: block.index("</div>\n")], field  # and beside its field
    assert 'value="abc"' in page  # what was typed stays


def test_ids_posted_as_text_by_a_script_are_read_as_ticked_boxes(admin_user, tmp_path):
    from webapp.runs.forms import RunLaunchForm
    from webapp.runs.kinds import get_kind

    (tmp_path / "config.json").write_text("{}")
    a, b = (Policy.objects.create(name=n, model_dir=str(tmp_path)) for n in ("a", "b"))
    form = RunLaunchForm(
        get_kind("evaluation"),
        {"idempotency_key": "x", "baseline_policy_id": a.pk, "policy_ids": f"{a.pk}, {b.pk}", "name": "e"},
    )
    assert form.fields["policy_ids"].clean(f"{a.pk}, {b.pk}") == f"{a.pk},{b.pk}"
    assert not form.is_valid()  # read, then checked: the stand-in policies share no tokenizer
    assert f"policy_ids: policy {b.pk} does not share the baseline's tokenizer." in form.errors["policy_ids"]
    refused = RunLaunchForm(
        get_kind("evaluation"),
        {"idempotency_key": "y", "baseline_policy_id": a.pk, "policy_ids": "999999", "name": "e"},
    )
    assert not refused.is_valid() and "Select a valid choice" in refused.errors["policy_ids"][0]


def test_a_reward_model_launch_reports_name_epochs_and_heads_together(client, admin_user):
    """The issue's case: name and epochs (the config's own checks) and heads (found only once the tokenizer
    is known, by the kind's database check) used to come one submit after the other."""
    from annotate.services.datasets import SnapshotFilters, snapshot_create
    from tests.annotate.dataset_fixtures import voted_campaign
    from tests.rewardmodel.rm_fixtures import tiny_policy

    policy = tiny_policy()
    campaign, _ = voted_campaign([[1, 2], [5, 4], [2, 2]])
    snapshot = snapshot_create(name="s", campaigns=[campaign], seed=0, test_fraction=0.5, filters=SnapshotFilters())
    client.force_login(admin_user)
    response = client.post(
        "/runs/new/reward_model/",
        {
            "idempotency_key": "rm1",
            "snapshot_id": snapshot.pk,
            "eval_policy_id": policy.pk,
            "name": "bad/name",
            "backbone": "policy-llama",
            "hidden": 128,
            "layers": 2,
            "heads": 3,
            "max_length": 512,
            "epochs": -1,
            "batch_size": 16,
            "weight_decay": 0,
            "warmup_ratio": 0.05,
            "seed": 0,
            "checkpoint_every": 50,
        },
    )
    assert response.status_code == 400 and not Run.objects.filter(kind="reward_model").exists()
    page = response.content.decode()
    for field, text in (
        ("name", "name: a plain name"),
        ("epochs", "epochs: between 0 and 1,000; got -1"),
        ("hidden", "must split into 3 heads"),
        ("snapshot_id", "training pairs"),
    ):
        block = page[page.index(f'id="field-{field}"') :]
        assert text in block[: block.index("</div>\n")], field


def _rm_snapshot():
    from annotate.services.datasets import SnapshotFilters, snapshot_create
    from tests.annotate.dataset_fixtures import voted_campaign

    campaign, _ = voted_campaign([[1, 1], [5, 5]] * 24)
    return snapshot_create(name="s", campaigns=[campaign], seed=0, test_fraction=0.5, filters=SnapshotFilters())


def test_the_reward_model_form_launches_with_its_defaults(client, admin_user):
    """The learning rate starts empty ("the backbone's default") and an empty field is the default."""
    from tests.rewardmodel.rm_fixtures import tiny_policy

    Policy.objects.filter(pk=tiny_policy().pk).update(name="default-bc")  # the tokenizer a default run shares
    snapshot = _rm_snapshot()
    client.force_login(admin_user)
    form = client.get("/runs/new/reward_model/").content.decode()
    assert 'name="learning_rate"' in form
    values = dict(re.findall(r'name="(\w+)"[^>]*?value="([^"]*)"', form))
    values.update(snapshot_id=snapshot.pk, learning_rate="")
    response = client.post("/runs/new/reward_model/", values)
    assert response.status_code == 302, response.content.decode()[:3000]
    run = Run.objects.get(kind="reward_model")
    assert run.config["learning_rate"] is None and run.config["epochs"] == 3.0


def test_the_reward_model_form_checks_ranges_and_names_the_policy_run_to_wait_for(client, admin_user):
    snapshot = _rm_snapshot()
    bc = Run.objects.create(kind="bc", name="default policy", status=Run.Status.RUNNING, progress=0.43)
    client.force_login(admin_user)
    response = client.post(
        "/runs/new/reward_model/",
        {
            "idempotency_key": "rm2",
            "snapshot_id": snapshot.pk,
            "name": "rm",
            "backbone": "policy-llama",
            "epochs": "1000000",
            "hidden": "-5",
            "layers": "0",
            "max_length": "99999999999",
        },
    )
    assert response.status_code == 400 and not Run.objects.filter(kind="reward_model").exists()
    page = response.content.decode()
    for text in (
        "epochs: between 0 and 1,000; got 1e+06",
        "hidden: between 8 and 4,096; got -5",
        "layers: between 1 and 48; got 0",
        "max_length: between 16 and 32,768",
        f"still training in run #{bc.pk} (default policy, running, 43%)",
    ):
        assert text in page, text


@pytest.mark.django_db
def test_a_run_that_stopped_itself_says_so_beside_its_status(client, researcher):
    """A PPO run whose collapse guard ended it is "succeeded" (it kept its best checkpoint), and the
    list and its page say it stopped itself, with the run's own sentence on hover."""
    message = "Stopped after iteration 10: dev success fell to 5.0% from the start's 45.0%."
    fell = Run.objects.create(
        kind="ppo", name="ppo that fell", status="succeeded", summary={"stop_reason": "collapse", "message": message}
    )
    done = Run.objects.create(
        kind="ppo", name="ppo that finished", status="succeeded", summary={"stop_reason": "finished"}
    )
    client.force_login(researcher)
    listing = client.get("/runs/").content.decode()
    row = listing[listing.index(f'href="/runs/{fell.pk}/"') :].split("</tr>")[0]
    assert "stopped itself: collapse" in row and "dev success fell to 5.0%" in row
    other = listing[listing.index(f'href="/runs/{done.pk}/"') :].split("</tr>")[0]
    assert "stopped itself" not in other
    page = client.get(f"/runs/{fell.pk}/").content.decode()
    assert 'id="run-self-stop"' in page and "stopped itself: collapse" in page
