"""Bring your own agent through a real Celery worker (issue 29): every run kind with tools served
by an MCP server over stdio and over streamable HTTP, a Python environment with a demonstrator,
a killed tool server, and the loop's "next round".

The worker is a process of its own, started the way a deployment starts one: it knows the
environments only from ARBITER_ENVIRONMENTS_FILE, and its stderr is Celery's logging proxy (no
file descriptor), which used to fail every stdio MCP server on a worker.
"""

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from annotate.models import Policy, Trajectory
from tests.conftest import start_worker, stop_worker, token_client, wait_for
from tests.factories import CampaignFactory
from tests.helpers import PIPELINE, SERVER, assert_the_loop_ran, calculator_environments, calculator_policy
from training.envs.arithmetic import ArithmeticEnvironment
from training.models import Evaluation, LoopRound

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

QUEUE = "mcp-worker-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def configured(tmp_path_factory):
    """The environments file a deployment writes, an HTTP MCP server, and the worker that reads them."""
    root = tmp_path_factory.mktemp("mcp-worker")
    port = _free_port()
    http_log = (root / "http-server.log").open("w")
    http = subprocess.Popen([*SERVER, "--http", str(port)], stdout=http_log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    environments = calculator_environments(root, http_port=port)
    path = root / "environments.json"
    path.write_text(json.dumps(environments))
    yield {"environments": environments, "file": str(path)}
    http.terminate()
    http.wait(timeout=10)
    http_log.close()


@pytest.fixture(scope="module")
def worker(configured, django_db_setup, django_db_blocker):
    proc, log = start_worker(
        queues=QUEUE,
        name="mcp-worker",
        env_extra={
            "ARBITER_ENVIRONMENTS_FILE": configured["file"],
            "RUN_QUEUE": QUEUE,
            "ARBITER_ENVIRONMENT_MODULES": "tests.helpers",
        },
    )
    yield proc
    stop_worker(proc, log)


@pytest.fixture
def api(worker, configured, settings, admin_user):
    """The web side of the same deployment: the same environments, runs sent to the worker's queue."""
    from training.envs import services

    settings.ARBITER_ENVIRONMENTS = configured["environments"]
    settings.RUN_QUEUE = QUEUE
    settings.ARBITER_ENVIRONMENT_MODULES = ["tests.helpers"]
    yield token_client(admin_user)
    for env in list(services._built.values()):
        env.close()
    services._built.clear()


@pytest.fixture(scope="module")
def calculator_policy_dir(tmp_path_factory):
    return calculator_policy(tmp_path_factory.mktemp("calc-policy") / "model")


@pytest.fixture
def policy(calculator_policy_dir):
    return Policy.objects.create(name="calculator-bc", version="1", model_dir=str(calculator_policy_dir))


def _launch(api, kind: str, **config) -> int:
    response = api.post("/api/v1/runs/", {"kind": kind, "config": config}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _ended(api, run_id: int, timeout: float = 240) -> dict:
    return wait_for(
        lambda: (b := api.get(f"/api/v1/runs/{run_id}").json())["status"] in ("succeeded", "failed", "cancelled") and b,
        timeout=timeout,
    )


def _calls(policy, environment: str, tool: str = "calculate") -> list[dict]:
    stored = Trajectory.objects.filter(policy=policy, task__environment=environment)
    return [s for t in stored for s in t.steps if s["kind"] == "action" and s["tool"] == tool]


@pytest.mark.parametrize("environment", ["calc-stdio", "calc-http"])
def test_rollout_and_evaluation_runs_on_a_worker_call_the_mcp_server(api, policy, environment):
    campaign = CampaignFactory()
    body = _ended(
        api,
        _launch(
            api,
            "rollout",
            policy_id=policy.pk,
            environment=environment,
            tasks=6,
            samples_per_task=2,
            campaign_id=campaign.pk,
        ),
    )
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    calls = _calls(policy, environment)
    assert calls and all(s.get("call_id") for s in calls)
    observations = [s for t in Trajectory.objects.filter(policy=policy) for s in t.steps if s["kind"] == "observation"]
    assert not [o for o in observations if "tool server" in o.get("content", "")]  # never an infrastructure error
    evaluation = _ended(
        api,
        _launch(
            api, "evaluation", baseline_policy_id=policy.pk, environment=environment, best_of_n="", tasks=4, samples=1
        ),
    )
    assert evaluation["status"] == "succeeded", evaluation["error"] + evaluation.get("log", "")
    assert Evaluation.objects.get(pk=evaluation["summary"]["evaluation_id"]).config["environment"] == environment


@pytest.mark.parametrize("kind", ["ppo", "rloo", "grpo"])
def test_each_rl_algorithm_trains_on_a_worker_against_a_stdio_mcp_server(api, policy, kind):
    body = _ended(
        api,
        _launch(
            api,
            kind,
            policy_id=policy.pk,
            environment="calc-stdio",
            reward="rubric",
            iterations=1,
            episodes_per_iteration=8,
            minibatch_size=4,
            group_size=2,
            rollout_batch_size=8,
            eval_every=1,
            eval_samples=1,
            dev_tasks=4,
            policy_name=kind,
        ),
    )
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    assert body["summary"]["last_policy_id"] and body["summary"]["iterations"] == 1
    assert _calls(policy, "calc-stdio") == []  # RL stores no trajectories; its episodes played the server
    assert "calculate" in body.get("log", "") or body["summary"]["last_policy_id"]


def test_a_bc_run_on_a_worker_and_its_rollouts_play_the_bc_runs_environment(api):
    campaign = CampaignFactory()
    body = _ended(
        api,
        _launch(
            api,
            "bc",
            environment="arith-small",
            policy_name="arith-bc",
            hidden=32,
            layers=1,
            heads=2,
            vocab_size=300,
            max_steps=40,
            warmup_steps=5,
            extra_worlds=0,
            rollout_campaign_id=campaign.pk,
            rollout_tasks=4,
            rollout_samples=2,
        ),
    )
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    follow_up = _ended(api, body["summary"]["rollout_run_id"])
    assert follow_up["status"] == "succeeded", follow_up["error"] + follow_up.get("log", "")
    stored = Trajectory.objects.filter(policy_id=body["summary"]["policy_id"])
    assert stored and set(stored.values_list("task__environment", flat=True)) == {"arith-small"}


def test_a_tool_server_killed_mid_run_fails_the_run_with_the_reason_and_stores_nothing(api, policy):
    body = _ended(
        api, _launch(api, "rollout", policy_id=policy.pk, environment="calc-dying", tasks=8, samples_per_task=2)
    )
    assert body["status"] == "failed"
    assert "stopped answering" in body["error"] and "restarted 1 time" in body["error"]
    assert "not the agent's error" in body["error"]
    assert not Trajectory.objects.filter(policy=policy).exists()


def test_the_loop_on_an_mcp_environment_and_its_next_round_on_the_worker(api, policy, capsys):
    """run_pipeline in a shell (as users run it), then "next round" from the dashboard: the
    round's rollouts play the stdio server from the worker."""
    call_command(
        "run_pipeline", "--name", "mcp-loop", "--environment", "calc-stdio", "--policy-id", str(policy.pk), *PIPELINE
    )
    assert_the_loop_ran("calc-stdio", "calculate", policy)
    first = LoopRound.objects.get(loop="mcp-loop", number=1)
    assert first.stage == LoopRound.Stage.DONE and first.evaluation.config["environment"] == "calc-stdio"
    body = _ended(api, _launch(api, "round", loop="mcp-loop", labels="people"))
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    second = LoopRound.objects.get(loop="mcp-loop", number=2)
    assert second.stage == LoopRound.Stage.LABELLING and second.campaign.comparisons.exists()
    played = Trajectory.objects.filter(policy=second.start_policy, task__environment="calc-stdio")
    assert played.exists() and _calls(second.start_policy, "calc-stdio")
    assert os.environ.get("ARBITER_ENVIRONMENTS_FILE") is None  # the test process knew them from settings only


def test_a_python_environment_without_a_demonstrator_rolls_out_on_a_worker_and_refuses_bc(api, policy):
    catalog = "tests.helpers:Catalog"
    body = _ended(api, _launch(api, "rollout", policy_id=policy.pk, environment=catalog, tasks=4, samples_per_task=2))
    assert body["status"] == "succeeded", body["error"] + body.get("log", "")
    assert set(Trajectory.objects.filter(policy=policy).values_list("task__environment", flat=True)) == {"catalog"}
    refused = api.post("/api/v1/runs/", {"kind": "bc", "config": {"environment": catalog}}, format="json")
    assert refused.status_code == 400 and "has no scripted demonstrator" in json.dumps(refused.json())


def test_a_registered_hugging_face_chat_policy_rolls_out_and_trains_on_a_worker(api, tmp_path):
    """A Qwen2-architecture chat model (random, tiny) registered for the stdio MCP environment:
    its rollouts and a GRPO run go through the worker, JSON calls and all."""
    from tests.training.chat_models import chat_model_dir

    qwen = chat_model_dir(tmp_path / "qwen", "qwen2", [ArithmeticEnvironment(seed=11, n_tasks=60)])
    call_command("register_policy", str(qwen), "--name", "qwen-calc", "--environment", "calc-stdio")
    chat = Policy.objects.get(name="qwen-calc")
    played = _ended(
        api,
        _launch(
            api,
            "rollout",
            policy_id=chat.pk,
            environment="calc-stdio",
            tasks=3,
            samples_per_task=2,
            max_action_tokens=64,
        ),
    )
    assert played["status"] == "succeeded", played["error"] + played.get("log", "")
    stored = Trajectory.objects.filter(policy=chat)
    assert stored.count() >= 3 and all(t.metadata["tools"] for t in stored)
    trained = _ended(
        api,
        _launch(
            api,
            "grpo",
            policy_id=chat.pk,
            environment="calc-stdio",
            reward="rubric",
            iterations=1,
            episodes_per_iteration=4,
            minibatch_size=2,
            group_size=2,
            rollout_batch_size=4,
            eval_every=1,
            eval_samples=1,
            dev_tasks=2,
            max_action_tokens=64,
            policy_name="qwen-grpo",
        ),
    )
    assert trained["status"] == "succeeded", trained["error"] + trained.get("log", "")
    checkpoint = Policy.objects.get(pk=trained["summary"]["last_policy_id"])
    assert json.loads((Path(checkpoint.model_dir) / "config.json").read_text())["model_type"] == "qwen2"
