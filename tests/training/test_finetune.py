"""SFT and DPO runs from a snapshot (issue 33): rows rendered in the policy's own format with the
mask of what it wrote, TRL's trainers on them, a tuned policy registered with its lineage;
launched through the API, refused clearly, and on a real Celery worker cancelled and resumed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from annotate.chat_messages import prompt_messages, steps_to_messages
from annotate.exports import iter_rows
from annotate.models import Policy
from tests.conftest import token_client, wait_for
from tests.factories import UserFactory
from tests.policy_fixtures import tiny_policy_dir
from tests.training.correction_fixtures import corrected_snapshot
from training.envs.base import EpisodeRunner
from training.envs.services import environment_get
from training.policy.chat import ChatFormat
from training.policy.conversations import ConversationError, PolicyConversations, template_messages
from training.policy.episodes import episode_tokens, play_scripted
from training.policy.model_io import load_policy
from training.policy.parsers import CompactParser
from webapp.models import Run


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory) -> Path:
    return tiny_policy_dir(tmp_path_factory.mktemp("finetune") / "policy")


@pytest.fixture(scope="module")
def chat(policy_dir):
    _, tokenizer = load_policy(policy_dir)
    return ChatFormat.for_policy(tokenizer, policy_dir)


@pytest.fixture(scope="module")
def demonstration():
    """A scripted encyclopedia episode, and its OpenAI-form messages and tools as the exports write them."""
    env = environment_get("encyclopedia")
    runner = EpisodeRunner(env)
    tools = list(runner.tools.values())
    task = env.tasks("train")[0]
    episode = play_scripted(runner, task, env.demonstrator(seed=0), CompactParser(tools))
    messages = prompt_messages(task.prompt, env.system_prompt) + steps_to_messages(episode.steps)
    return episode, messages, json.dumps([t.as_openai() for t in tools]), [t.as_openai() for t in tools]


def test_an_exported_conversation_tokenizes_exactly_as_the_rollout_that_played_it(chat, demonstration):
    episode, messages, tools_json, tools = demonstration
    example = PolicyConversations(chat).sft(messages, tools_json)
    ids, mask = episode_tokens(chat, episode, tools)
    assert example == {"input_ids": ids, "assistant_masks": mask}
    learnt = chat.tokenizer.decode([i for i, m in zip(ids, mask) if m])
    assert "answer[ " in learnt  # the final answer written as the policy's answer call
    assert "Quote saved." not in learnt and "Quotes:" not in learnt  # tool results and the export's quote block


def test_a_dpo_row_shares_the_steps_before_the_fix_and_masks_tool_results(chat, demonstration):
    _, messages, tools_json, _ = demonstration
    prompt, steps = messages[:2], messages[2:]
    wrong = steps[:2] + [{"role": "assistant", "content": "Nobody at all", "tool_calls": None}]
    example = PolicyConversations(chat).preference(prompt, steps, wrong, tools_json)
    first_call = chat.tokenizer.decode(chat.encode(template_messages(steps[:1], [], CompactParser())[0]["content"]))
    assert first_call in chat.tokenizer.decode(example["prompt_ids"])  # the shared search is context
    chosen = chat.tokenizer.decode([i for i, m in zip(example["chosen_ids"], example["chosen_mask"]) if m])
    rejected = chat.tokenizer.decode([i for i, m in zip(example["rejected_ids"], example["rejected_mask"]) if m])
    assert rejected.startswith("answer[ Nobody at all]")
    observation = next(m["content"] for m in steps[3:] if m["role"] == "tool")
    assert observation[:20] not in chosen and observation[:20] in chat.tokenizer.decode(example["chosen_ids"])


def test_the_collator_passes_each_sides_own_mask(chat, demonstration):
    from training.finetune.train import _masked_dpo_classes

    _, messages, tools_json, _ = demonstration
    wrong = messages[2:4] + [{"role": "assistant", "content": "x", "tool_calls": None}]
    example = PolicyConversations(chat).preference(messages[:2], messages[2:], wrong, tools_json)
    _, collator_class = _masked_dpo_classes()
    batch = collator_class(pad_token_id=chat.tokenizer.pad_token_id)([example, example])
    prompt = len(example["prompt_ids"])
    chosen = batch["completion_mask"][0, prompt : prompt + len(example["chosen_ids"])].tolist()
    assert chosen == example["chosen_mask"] and 0 in chosen and batch["completion_mask"][0, :prompt].sum() == 0
    rejected = batch["completion_mask"][2, prompt : prompt + len(example["rejected_ids"])].tolist()
    assert rejected == example["rejected_mask"]


def test_rows_the_policy_cannot_write_are_refused_with_the_reason(chat, demonstration):
    _, messages, tools_json, _ = demonstration
    conversations = PolicyConversations(chat)
    two_calls = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "search", "arguments": '{"query": "x"}'}},
                {"id": "b", "type": "function", "function": {"name": "search", "arguments": '{"query": "y"}'}},
            ],
        }
    ]
    bad = [
        (messages[:2] + two_calls, "cannot write these 2 call(s)"),
        (messages[:2] + [{"role": "tool", "tool_call_id": "nope", "content": "x"}], "tool_call_id"),
        (messages[:2], "no assistant turn"),
        ("not a list", "a list"),
        (messages[:2] + [{"role": "assistant", "content": {"text": 1}}], "messages[2]"),
        (
            messages[:2]
            + [{"role": "assistant", "tool_calls": [{"function": {"name": "search", "arguments": "{bad"}}]}],
            "arguments",
        ),
    ]
    for rows, expected in bad:
        with pytest.raises(ConversationError, match=None) as caught:
            conversations.sft(rows, tools_json)
        assert expected in str(caught.value), (expected, str(caught.value))
    for tools in ('{"type": "function"}', "[1]", '[{"type": "function", "function": {"name": 3}}]'):
        with pytest.raises(ConversationError):
            conversations.sft(messages, tools)


def test_serving_renders_a_conversation_as_training_does(policy_dir, demonstration):
    from training.policy.conversations import tools_of
    from training.policy.serving import PolicyServer

    _, messages, tools_json, _ = demonstration
    server = PolicyServer(policy_dir, name="tiny")
    tools = tools_of(json.loads(tools_json))
    assert server._template_messages(messages, tools) == template_messages(messages, tools, server.chat.parser(tools))


# --- Runs -----------------------------------------------------------------------------------


def _launch(api, kind: str, config: dict) -> int:
    response = api.post("/api/v1/runs/", {"kind": kind, "config": config}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["sft", "dpo"])
def test_a_run_tunes_the_policy_on_the_snapshot_and_registers_it(kind, policy_dir):
    from webapp.runs.services import run_execute

    snapshot, made = corrected_snapshot()
    start = Policy.objects.create(name="tiny", version="1", model_dir=str(policy_dir))
    api = token_client(UserFactory(roles=["admin"]))
    run_id = _launch(
        api, kind, {"policy_id": start.pk, "snapshot_id": snapshot.pk, "max_steps": 2, "batch_size": 2, "threads": 1}
    )
    run_execute(run_id=run_id, attempt=1)
    run = Run.objects.get(pk=run_id)
    assert run.status == "succeeded", run.error
    tuned = Policy.objects.get(pk=run.summary["policy_id"])
    assert tuned.parent == start and tuned.run_id == run_id and (Path(tuned.model_dir) / "config.json").exists()
    assert tuned.metadata["finetune"]["snapshot_id"] == snapshot.pk and run.summary["steps"] == 2
    expected_rows = len(list(iter_rows(snapshot, kind, split="train")))
    assert run.summary["train_rows"] == expected_rows > 0
    assert {link["type"] for link in run.lineage} >= {"policy", "dataset"}
    assert any(link["direction"] == "output" and link["id"] == tuned.pk for link in run.lineage)
    assert (Path(tuned.model_dir) / "arbiter_policy.json").exists() or not (policy_dir / "arbiter_policy.json").exists()
    load_policy(tuned.model_dir)  # loads and plays as any policy
    from django.test import Client

    client = Client()
    client.force_login(UserFactory(roles=["researcher"]))
    page = client.get(f"/training/policies/{tuned.pk}/").content.decode()
    assert f"{kind.upper()} on dataset" in page and f"/annotate/datasets/{snapshot.pk}/" in page


@pytest.mark.django_db
def test_bad_runs_are_refused_with_the_field_named(policy_dir):
    from annotate.services.datasets import snapshot_create
    from tests.helpers import annotators, label_all, make_campaign

    api = token_client(UserFactory(roles=["admin"]))
    start = Policy.objects.create(name="tiny", version="2", model_dir=str(policy_dir))
    campaign = make_campaign(n_comparisons=6, k=1)
    label_all(campaign, annotators(1))
    bare = snapshot_create(name="no fixes", campaigns=[campaign], test_fraction=0.3, seed=1)
    cases = [
        ("sft", {"policy_id": start.pk, "snapshot_id": bare.pk}, "no accepted correction"),
        ("dpo", {"policy_id": start.pk, "snapshot_id": bare.pk, "source": "corrections"}, "accepted corrections"),
        ("sft", {"policy_id": 999999, "snapshot_id": bare.pk}, "policy_id"),
        ("dpo", {"policy_id": start.pk, "snapshot_id": 999999}, "snapshot_id"),
        ("dpo", {"policy_id": start.pk, "snapshot_id": bare.pk, "beta": 0}, "beta"),
        ("dpo", {"policy_id": start.pk, "snapshot_id": bare.pk, "loss_type": "magic"}, "loss_type"),
        ("sft", {"policy_id": start.pk, "snapshot_id": bare.pk, "learning_rate": "fast"}, "learning_rate"),
        ("sft", {"policy_id": start.pk, "snapshot_id": bare.pk, "policy_name": "../x"}, "policy_name"),
        ("sft", {"policy_id": [1], "snapshot_id": {"a": 1}}, "policy_id"),
    ]
    for kind, config, expected in cases:
        response = api.post("/api/v1/runs/", {"kind": kind, "config": config}, format="json")
        assert response.status_code == 400, (config, response.content)
        assert expected in json.dumps(response.json()), (expected, response.json())
    assert not Run.objects.filter(kind__in=["sft", "dpo"]).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_dpo_run_on_a_real_worker_is_cancelled_and_resumed_from_its_checkpoint(celery_worker_process, policy_dir):
    snapshot, _ = corrected_snapshot()
    start = Policy.objects.create(name="tiny", version="3", model_dir=str(policy_dir))
    api = token_client(UserFactory(roles=["admin"]))
    config = {
        "policy_id": start.pk,
        "snapshot_id": snapshot.pk,
        "max_steps": 60,
        "batch_size": 2,
        "checkpoint_every": 5,
        "threads": 1,
    }
    run_id = _launch(api, "dpo", config)
    wait_for(lambda: (Run.objects.get(pk=run_id).checkpoint or {}).get("path"), timeout=90)
    assert api.post(f"/api/v1/runs/{run_id}/cancel").status_code in (200, 202)
    wait_for(lambda: Run.objects.get(pk=run_id).status == "cancelled", timeout=60)
    saved = Run.objects.get(pk=run_id).checkpoint
    assert not Policy.objects.filter(run_id=run_id).exists()  # nothing half-trained is registered
    assert api.post(f"/api/v1/runs/{run_id}/resume").status_code in (200, 202)
    body = wait_for(
        lambda: (b := api.get(f"/api/v1/runs/{run_id}").json())["status"] not in ("queued", "running") and b,
        timeout=120,
    )
    assert body["status"] == "succeeded", body.get("error")
    assert body["summary"]["steps"] == 60 and Run.objects.get(pk=run_id).attempt == 2
    saves = [int(step) for step in re.findall(r"Checkpoint at step (\d+)\.", Run.objects.get(pk=run_id).log)]
    assert saved["step"] in saves and saves == sorted(set(saves))  # the second attempt went on from the checkpoint
    assert Policy.objects.get(pk=body["summary"]["policy_id"]).run_id == run_id


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_a_chat_models_rows_are_its_own_format_and_train(family, tmp_path):
    """Any registered chat policy: a Qwen2 (Hermes <tool_call>) or Llama 3 (JSON) model's rows are
    tokenized exactly as its rollout of the same episode, and SFT and DPO train it."""
    from tests.training.chat_models import chat_model_dir
    from training.envs.arithmetic import ArithmeticEnvironment
    from training.finetune.config import FinetuneConfig
    from training.finetune.train import finetune

    env = ArithmeticEnvironment(seed=3, n_tasks=40)
    path = chat_model_dir(tmp_path / "model", family, [env])
    _, tokenizer = load_policy(path)
    chat = ChatFormat.for_policy(tokenizer, path)
    runner = EpisodeRunner(env)
    tools = list(runner.tools.values())
    rows, pairs = [], []
    for task in env.tasks("train")[:4]:
        episode = play_scripted(runner, task, env.demonstrator(seed=0), chat.parser(tools))
        messages = prompt_messages(task.prompt, env.system_prompt) + steps_to_messages(episode.steps)
        tools_json = json.dumps([t.as_openai() for t in tools])
        example = PolicyConversations(chat).sft(messages, tools_json)
        assert example == dict(
            zip(("input_ids", "assistant_masks"), episode_tokens(chat, episode, [t.as_openai() for t in tools]))
        )
        rows.append({"messages": messages, "tools": tools_json})
        wrong = messages[2:-1] + [{"role": "assistant", "content": "0", "tool_calls": None}]
        pairs.append({"prompt": messages[:2], "chosen": messages[2:], "rejected": wrong, "tools": tools_json})
    config = FinetuneConfig(max_steps=1, batch_size=2, checkpoint_every=0, threads=1)
    for kind, data in (("sft", rows), ("dpo", pairs)):
        result = finetune(kind, policy_dir=path, train_rows=data, test_rows=[], config=config, out_dir=tmp_path / kind)
        assert result.steps == 1 and not result.skipped and (Path(result.model_dir) / "config.json").exists()


def _changed(before: dict, after_dir: Path) -> set[str]:
    from safetensors.torch import load_file

    after = load_file(str(after_dir / "model.safetensors"))
    assert set(after) <= set(before), "the saved policy has names its architecture lacks (unmerged adapters)"
    return {name for name, value in after.items() if not value.equal(before[name])}


@pytest.mark.parametrize("kind", ["sft", "dpo"])
def test_lora_trains_adapters_only_and_saves_them_merged(kind, tmp_path):
    """With lora_rank, SFT and DPO train low-rank adapters of the linear layers (peft) and save a
    plain model of the same architecture with them merged in: the embeddings are untouched, the
    attention and MLP weights moved, and nothing of peft is needed to load it."""
    from safetensors.torch import load_file

    from tests.training.chat_models import chat_model_dir
    from training.envs.arithmetic import ArithmeticEnvironment
    from training.finetune.config import FinetuneConfig
    from training.finetune.train import finetune

    env = ArithmeticEnvironment(seed=3, n_tasks=40)
    path = chat_model_dir(tmp_path / "model", "qwen2", [env])
    _, tokenizer = load_policy(path)
    chat = ChatFormat.for_policy(tokenizer, path)
    runner = EpisodeRunner(env)
    tools = list(runner.tools.values())
    tools_json = json.dumps([t.as_openai() for t in tools])
    rows = []
    for task in env.tasks("train")[:4]:
        episode = play_scripted(runner, task, env.demonstrator(seed=0), chat.parser(tools))
        messages = prompt_messages(task.prompt, env.system_prompt) + steps_to_messages(episode.steps)
        wrong = messages[2:-1] + [{"role": "assistant", "content": "0", "tool_calls": None}]
        rows.append(
            {"messages": messages, "tools": tools_json}
            if kind == "sft"
            else {"prompt": messages[:2], "chosen": messages[2:], "rejected": wrong, "tools": tools_json}
        )
    before = load_file(str(Path(path) / "model.safetensors"))
    config = FinetuneConfig(max_steps=2, batch_size=2, checkpoint_every=0, threads=1, lora_rank=4, learning_rate=1e-2)
    result = finetune(kind, policy_dir=path, train_rows=rows, test_rows=[], config=config, out_dir=tmp_path / kind)
    assert result.steps == 2
    changed = _changed(before, Path(result.model_dir))
    assert not any("embed" in name for name in changed)
    assert any("q_proj" in name for name in changed) and any("mlp" in name for name in changed)
    model, _ = load_policy(result.model_dir)
    assert type(model).__name__ == "Qwen2ForCausalLM"


def test_lora_settings_out_of_range_are_refused():
    from training.finetune.config import FinetuneConfig

    assert FinetuneConfig(lora_rank=-1).validate() == ["lora_rank: between 0 and 4,096; got -1."]
    assert FinetuneConfig(lora_rank=8, lora_alpha=0).validate() == ["lora_alpha: above 0 with LoRA."]
    assert FinetuneConfig(lora_rank=8).validate() == []
