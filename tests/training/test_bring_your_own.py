"""Bring your own agent, end to end: an environment defined here, outside Arbiter (named by dotted
path), goes through behaviour cloning, rollouts, simulated labeling, a reward model, PPO and the
before/after evaluation, the same `run_pipeline` the encyclopedia uses. Tools served by a real
MCP server go through the same loop, and every run kind on a worker, in test_mcp_on_worker.py."""

import json
import random
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.conftest import token_client
from tests.helpers import PIPELINE, assert_the_loop_ran
from training.envs.arithmetic import ArithmeticEnvironment
from training.envs.base import Environment, EnvTask, EpisodeRecord, Rubric, Tool, ToolResult
from training.models import Evaluation
from webapp.models import Run

pytestmark = [pytest.mark.django_db(transaction=True)]

INVENTORY = "tests.training.test_bring_your_own:Inventory"
COLOURS = ["red", "blue", "green", "grey", "black", "white", "pink", "gold"]
THINGS = ["lamps", "chairs", "boxes", "ropes", "cups", "tiles", "bolts", "nails", "pens", "mats"]


class Inventory(Environment):
    """A user's own environment: stock counts behind a lookup tool, nothing of Arbiter's world."""

    name = "inventory"
    description = "How many of an item are in stock: look it up, answer the count."
    system_prompt = "Look the item up, then answer with its count."

    def __init__(self, *, seed: int = 0):
        rng = random.Random(f"inventory:{seed}")
        items = [f"{c} {t}" for c in COLOURS for t in THINGS]
        rng.shuffle(items)
        self.stock = {item: rng.randint(1, 99) for item in items}
        self._tasks = [
            EnvTask(
                external_id=f"inventory-{seed}-{i}",
                prompt=f"How many {item} are in stock?",
                reference=str(count),
                split=("train", "train", "train", "dev", "eval")[i % 5],
                metadata={"item": item},
            )
            for i, (item, count) in enumerate(self.stock.items())
        ]

    def tasks(self, split):
        return [t for t in self._tasks if t.split == split]

    def tools(self):
        text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        return [
            Tool(
                "lookup",
                "The stock count of an item.",
                {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
            ),
            Tool("answer", "Answer and end the episode.", text),
        ]

    def start(self, task):
        return {"seen": []}

    def call(self, state, tool, arguments):
        if tool == "answer":
            return ToolResult(arguments["text"], done=True, answer=arguments["text"])
        item = arguments["item"].strip()
        if item not in self.stock:
            return ToolResult(f"No item named {item!r}.", error=True)
        state["seen"].append(str(self.stock[item]))
        return ToolResult(f"{item}: {self.stock[item]}")

    def outcome(self, state, episode: EpisodeRecord):
        correct = (episode.answer or "").strip() == episode.task.reference
        return Rubric(
            correct=correct,
            utility=10.0 * correct - episode.calls - 5.0 * episode.tool_errors,
            parts={"looked_up": episode.task.reference in state["seen"]},
        )

    def demonstrator(self, *, seed=0, **options):
        def turns(task, state):
            yield "lookup", {"item": task.metadata["item"]}
            yield "answer", {"text": state["seen"][-1] if state["seen"] else ""}

        return turns


def cloned_policy(environment: str, tmp_path, name: str):
    from training.policy.bc import BCConfig
    from training.policy.services import policy_train_default

    config = BCConfig(
        environment=environment,
        hidden=48,
        layers=2,
        heads=2,
        vocab_size=400,
        max_steps=150,
        max_seconds=0,
        extra_worlds=0,
        demos_per_task=2,
        learning_rate=3e-3,
        warmup_steps=5,
    )
    return policy_train_default(config=config, name=name, target=tmp_path / name, log=lambda m: None)


def test_a_python_environment_of_the_users_goes_through_the_whole_loop(tmp_path, capsys, admin_user, client):
    policy = cloned_policy(INVENTORY, tmp_path, "inventory-bc")
    assert policy.metadata["environment"] == "inventory" and policy.metadata["tool_parser"] == "compact"
    call_command(
        "run_pipeline", "--name", "inventory", "--environment", INVENTORY, "--policy-id", str(policy.pk), *PIPELINE
    )
    assert_the_loop_ran("inventory", "lookup", policy)
    # The before/after tables show this environment's figures, not the encyclopedia's F1 and quotes.
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if line.startswith("system"))
    assert "success" in header and "steps" in header and "F1" not in header and "quotes" not in header
    client.force_login(admin_user)
    page = client.get(f"/training/evaluations/{Evaluation.objects.get().pk}/").content.decode()
    assert "<th>Success</th>" in page and "<th>Quote support</th>" not in page and "<th>F1</th>" not in page


def test_launches_name_environments_and_refuse_unknown_ones_and_foreign_tasks(admin_user, client):
    from tests.rewardmodel.rm_fixtures import tiny_policy

    api = token_client(admin_user)
    policy = tiny_policy()
    client.force_login(admin_user)
    page = client.get("/runs/new/rollout/")
    assert page.status_code == 200
    for name in ("encyclopedia", "arithmetic"):
        assert f'<option value="{name}"' in page.content.decode()

    def launch(**config):
        return api.post(
            "/api/v1/runs/", {"kind": "rollout", "config": {"policy_id": policy.pk, **config}}, format="json"
        )

    refused = launch(environment="nope")
    assert refused.status_code == 400 and "no environment 'nope'" in json.dumps(refused.json())
    # A run config is input: a dotted path is imported only from the modules the deployment allows.
    for name in ("os:system", "antigravity:Thing", "training.envs.base:Environment"):
        outside = launch(environment=name)
        assert outside.status_code == 400 and "ARBITER_ENVIRONMENT_MODULES" in json.dumps(outside.json()), name
    assert "antigravity" not in sys.modules
    foreign = launch(environment="arithmetic", split="train", task_ids="inventory-0-1")
    assert foreign.status_code == 400 and "not a task of environment 'arithmetic'" in json.dumps(foreign.json())
    other_split = ArithmeticEnvironment().tasks("eval")[0].external_id
    wrong_split = launch(environment="arithmetic", split="train", task_ids=other_split)
    assert wrong_split.status_code == 400 and "is in the eval split of arithmetic, not in train" in json.dumps(
        wrong_split.json()
    )
    for kind, config in (
        ("ppo", {"policy_id": policy.pk, "reward": "rubric", "environment": "nope"}),
        ("evaluation", {"baseline_policy_id": policy.pk, "best_of_n": "", "environment": "nope"}),
        ("best_of_n", {"policy_id": policy.pk, "reward_model_id": 1, "environment": "nope"}),
        ("bc", {"environment": "nope"}),
    ):
        response = api.post("/api/v1/runs/", {"kind": kind, "config": config}, format="json")
        assert response.status_code == 400 and "no environment 'nope'" in json.dumps(response.json()), kind
    later = api.post("/api/v1/runs/", {"kind": "bc", "config": {"extra_worlds": 63}}, format="json")
    assert later.status_code == 400 and "extra_worlds: 0 to 62" in json.dumps(later.json())  # kept fresh for RL's dev
    cloned = api.post("/api/v1/runs/", {"kind": "bc", "config": {"environment": INVENTORY}}, format="json")
    assert cloned.status_code == 201  # a user's environment with a scripted demonstrator can be cloned
    assert not Run.objects.filter(kind__in=["ppo", "evaluation", "best_of_n"]).exists()


def test_a_hugging_face_chat_model_is_registered_as_a_policy_after_its_checks(tmp_path, capsys, admin_user, client):
    from django.core.management.base import CommandError

    from annotate.models import Policy
    from tests.training.chat_models import chat_model_dir

    qwen = chat_model_dir(tmp_path / "qwen", "qwen2", [ArithmeticEnvironment(seed=0, n_tasks=20)])
    Policy.objects.create(name="my-agent", version="7")  # known from its imported transcripts, no model yet
    call_command(
        "register_policy", str(qwen), "--name", "my-agent", "--agent-version", "7", "--environment", "arithmetic"
    )
    policy = Policy.objects.get(name="my-agent", version="7")
    assert policy.model_dir == str(qwen.resolve()) and policy.metadata["tool_parser"] == "hermes"
    assert "read by the hermes parser (detected from its chat template)" in capsys.readouterr().out
    client.force_login(admin_user)
    page = client.get(f"/training/policies/{policy.pk}/").content.decode()
    assert "<strong>hermes</strong> parser (detected from the chat template)" in page

    with pytest.raises(CommandError, match="no config.json"):
        call_command("register_policy", str(tmp_path), "--name", "nothing")
    from transformers import T5Config

    T5Config(d_model=8, d_ff=8, num_layers=1, num_heads=1, d_kv=8, vocab_size=10).save_pretrained(tmp_path / "t5")
    with pytest.raises(CommandError):
        call_command("register_policy", str(tmp_path / "t5"), "--name", "t5")
    with pytest.raises(CommandError, match="already has a model"):
        call_command(
            "register_policy",
            str(chat_model_dir(tmp_path / "llama", "llama", [])),
            "--name",
            "my-agent",
            "--agent-version",
            "7",
        )
    with pytest.raises(CommandError, match="no environment 'nope'"):
        call_command("register_policy", str(qwen), "--name", "other", "--environment", "nope")
    assert not Policy.objects.filter(name__in=["nothing", "t5", "other"]).exists()


def test_behaviour_cloning_is_bounded_by_steps_and_says_loudly_when_it_ran_over_budget(tmp_path):
    from training.policy.bc import BCConfig
    from training.policy.services import policy_train_default

    lines = []
    config = BCConfig(
        environment=INVENTORY,
        hidden=32,
        layers=1,
        heads=2,
        vocab_size=300,
        max_steps=30,
        extra_worlds=0,
        demos_per_task=1,
        budget_seconds=0.001,
    )
    policy = policy_train_default(config=config, name="over-budget", target=tmp_path / "p", log=lines.append)
    assert policy.metadata["bc"]["steps"] == 30  # complete, not cut short
    assert policy.metadata["over_budget"] is True
    assert any(line.startswith("WARNING: behaviour cloning took") and "not cut short" in line for line in lines)


def test_rloo_and_grpo_are_run_kinds_beside_ppo_with_the_same_checks(admin_user, client):
    from tests.rewardmodel.rm_fixtures import tiny_policy

    api = token_client(admin_user)
    policy = tiny_policy()
    client.force_login(admin_user)
    for kind in ("rloo", "grpo"):
        page = client.get(f"/runs/new/{kind}/").content.decode()
        assert page.count(f'<option value="{kind}"') == 1 and 'name="group_size"' in page
        wrong = api.post(
            "/api/v1/runs/",
            {"kind": kind, "config": {"policy_id": policy.pk, "reward": "rubric", "algorithm": "ppo"}},
            format="json",
        )
        assert wrong.status_code == 400 and f"a {kind} run is {kind}" in json.dumps(wrong.json())
        uneven = api.post(
            "/api/v1/runs/",
            {"kind": kind, "config": {"policy_id": policy.pk, "reward": "rubric", "group_size": 5}},
            format="json",
        )
        assert uneven.status_code == 400 and "multiple of it" in json.dumps(uneven.json())
    assert not Run.objects.exists()


def test_the_launch_form_takes_an_allowed_dotted_path_and_refuses_others(admin_user, client, settings):
    """The environment field offers the known names and takes any other; the run's check decides."""
    from tests.rewardmodel.rm_fixtures import tiny_policy

    settings.ARBITER_ENVIRONMENT_MODULES = ["tests.training"]
    client.force_login(admin_user)
    policy = tiny_policy()
    form = {"policy_id": policy.pk, "split": "train", "tasks": 2, "samples_per_task": 2, "campaign_id": 0}
    page = client.get("/runs/new/rollout/").content.decode()
    assert 'list="id_environment-suggestions"' in page and '<option value="arithmetic">' in page
    launched = client.post(
        "/runs/new/rollout/", {**form, "idempotency_key": "dotted", "name": "dotted", "environment": INVENTORY}
    )
    assert launched.status_code == 302, launched.content.decode()[-2000:]
    assert Run.objects.get(name="dotted").config["environment"] == INVENTORY
    refused = client.post(
        "/runs/new/rollout/", {**form, "idempotency_key": "outside", "name": "outside", "environment": "os:system"}
    )
    assert refused.status_code == 400 and "ARBITER_ENVIRONMENT_MODULES" in refused.content.decode()
    assert not Run.objects.filter(name="outside").exists()


def test_a_bc_run_clones_into_a_registered_chat_model_in_its_own_format(tmp_path, admin_user):
    """The `bc` run kind from any registered policy: the demonstrations written as the Qwen2
    model writes tool calls (<tool_call> JSON), trained into its own weights and template."""
    from annotate.models import Policy
    from tests.training.chat_models import registered_qwen
    from training.policy.chat import tool_parser_of
    from webapp.runs.services import run_execute, run_launch

    base = registered_qwen(tmp_path, "my-qwen")
    run = run_launch(
        kind="bc",
        user=admin_user,
        enqueue=False,
        config={
            "environment": "arithmetic",
            "base_policy_id": base.pk,
            "policy_name": "qwen-cloned",
            "max_steps": 6,
            "warmup_steps": 1,
            "batch_size": 4,
            "extra_worlds": 0,
        },
    )
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    cloned = Policy.objects.get(pk=run.summary["policy_id"])
    assert cloned.parent_id == base.pk and cloned.metadata["base_policy"]["id"] == base.pk
    assert cloned.metadata["tool_parser"] == "hermes" and tool_parser_of(cloned.model_dir)[0] == "hermes"
    assert json.loads((Path(cloned.model_dir) / "config.json").read_text())["model_type"] == "qwen2"
    assert any(link["type"] == "policy" and link["id"] == base.pk for link in run.lineage)
    from webapp.errors import ArbiterError

    with pytest.raises(ArbiterError, match="base_policy_id: No policy with id 987"):
        run_launch(
            kind="bc", user=admin_user, enqueue=False, config={"environment": "arithmetic", "base_policy_id": 987}
        )


def test_a_bc_run_with_lora_trains_adapters_and_registers_them_merged(tmp_path, admin_user):
    """`lora_rank` clones the demonstrations into low-rank adapters of a registered model's
    linear layers; the policy saved is the same architecture with them merged in (embeddings
    untouched), and LoRA without a model to adapt is refused with the field named."""
    from safetensors.torch import load_file

    from annotate.models import Policy
    from tests.training.chat_models import registered_qwen
    from webapp.errors import ArbiterError
    from webapp.runs.services import run_execute, run_launch

    base = registered_qwen(tmp_path, "lora-qwen")
    config = {
        "environment": "arithmetic",
        "base_policy_id": base.pk,
        "policy_name": "qwen-lora",
        "max_steps": 4,
        "warmup_steps": 1,
        "batch_size": 4,
        "extra_worlds": 0,
        "dev_every": 2,
        "dev_tasks": 4,
        "lora_rank": 4,
        "learning_rate": 1e-2,
    }
    run = run_launch(kind="bc", user=admin_user, enqueue=False, config=config)
    run_execute(run_id=run.pk, attempt=run.attempt)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    assert "LoRA of rank 4" in run.log
    cloned = Policy.objects.get(pk=run.summary["policy_id"])
    assert cloned.metadata["config"]["lora_rank"] == 4
    before = load_file(str(Path(base.model_dir) / "model.safetensors"))
    after = load_file(str(Path(cloned.model_dir) / "model.safetensors"))
    assert set(after) == set(before)  # merged: no adapter weights, nothing of peft to load
    changed = {name for name in after if not after[name].equal(before[name])}
    assert changed and not any("embed" in name or "norm" in name for name in changed)
    for bad, field in (({"base_policy_id": 0}, "lora_rank"), ({"lora_alpha": 0}, "lora_alpha")):
        with pytest.raises(ArbiterError, match=field):
            run_launch(kind="bc", user=admin_user, enqueue=False, config={**config, **bad})
