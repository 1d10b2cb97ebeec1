"""Any Hugging Face chat model as the policy: tiny Qwen2 and Llama models with chat templates in
their families' styles go through rendering, tool-call parsing, behaviour cloning, rollouts
with an exact action mask, and PPO (no Django)."""

import json
from types import SimpleNamespace

import pytest
import torch

from tests.training.chat_models import agent_spans, chat_model_dir
from training.envs.arithmetic import ArithmeticEnvironment
from training.envs.base import EpisodeRunner, Limits
from training.policy.bc import BCConfig, demonstrations, play_demonstrations, train_bc
from training.policy.chat import POLICY_FILE, ChatFormat, ChatTemplateError
from training.policy.episodes import episode_tokens, play_scripted
from training.policy.model_io import load_policy, save_policy
from training.policy.parsers import (
    CompactParser,
    HermesParser,
    Llama3JsonParser,
    SmolLM2Parser,
    ToolCall,
    detect_parser,
)
from training.policy.rollout import RolloutConfig, rollout
from training.rl.config import RLConfig
from training.rl.scorers import rubric_scorer
from training.rl.trainer import train_rl

torch.set_num_threads(1)
PARSER = {"qwen2": "hermes", "llama": "llama3_json", "smollm2": "smollm2"}
MALFORMED = {
    "qwen2": "<tool_call>oops</tool_call>",
    "llama": '{"name": oops}',
    "smollm2": "<tool_call>[oops]</tool_call>",
}


@pytest.fixture(scope="module")
def env():
    return ArithmeticEnvironment(seed=3, n_tasks=120)


@pytest.fixture(scope="module", params=["qwen2", "llama", "smollm2"])
def family(request, env, tmp_path_factory):
    path = chat_model_dir(tmp_path_factory.mktemp(request.param) / "model", request.param, [env])
    return request.param, path


@pytest.fixture(scope="module")
def cloned_qwen(env, tmp_path_factory):
    """The tiny Qwen2 model behaviour-cloned for a few steps on the arithmetic demonstrations,
    written in its own <tool_call> format: enough to make real tool calls."""
    path = chat_model_dir(tmp_path_factory.mktemp("qwen-bc") / "model", "qwen2", [env])
    model, tokenizer = load_policy(path)
    chat = ChatFormat.for_policy(tokenizer, path)
    config = BCConfig(
        demos_per_task=1,
        extra_worlds=0,
        batch_size=8,
        max_steps=120,
        max_seconds=0,
        learning_rate=1e-2,
        warmup_steps=5,
        observation_loss_weight=0.1,
    )
    played = play_demonstrations(env, config, parser="hermes")
    train_bc(model, tokenizer, demonstrations(chat, played), config)
    save_policy(model, tokenizer, path, tool_parser="hermes")
    return path


def recomputed_logprobs(model, e) -> list[float]:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([e.ids])).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    return [logp[i - 1, e.ids[i]].item() for i, agent in enumerate(e.agent_mask) if agent]


# --- Parsers ---------------------------------------------------------------------------------


def test_each_family_s_tool_calls_are_parsed_and_written_back_the_same():
    hermes = HermesParser()
    turn = hermes.parse(
        'Let me check.\n<tool_call>\n{"name": "calculate", "arguments": {"expression": "2+2"}}\n'
        '</tool_call>\n<tool_call>{"name": "answer", "arguments": "{\\"text\\": \\"4\\"}"}</tool_call>'
    )
    assert turn.content == "Let me check." and not turn.problem
    assert turn.calls == (ToolCall("calculate", {"expression": "2+2"}), ToolCall("answer", {"text": "4"}))
    assert hermes.parse(hermes.format(list(turn.calls))).calls == turn.calls
    assert hermes.parse("<think>hm</think>It is 4.").content == "It is 4."

    llama = Llama3JsonParser()
    turn = llama.parse(
        '<|python_tag|>{"name": "calculate", "parameters": {"expression": "3*3"}}; '
        '{"name": "answer", "parameters": {"text": "9"}}'
    )
    assert [c.name for c in turn.calls] == ["calculate", "answer"] and not turn.problem
    assert llama.parse(llama.format(list(turn.calls))).calls == turn.calls
    assert llama.parse("The answer is 9.").content == "The answer is 9." and not llama.parse("9").calls

    smollm2 = SmolLM2Parser()
    turn = smollm2.parse(
        '<tool_call>[{"name": "calculate", "arguments": {"expression": "1+1"}}, '
        '{"name": "answer", "arguments": {"text": "2"}}]</tool_call>'
    )
    assert turn.calls == (ToolCall("calculate", {"expression": "1+1"}), ToolCall("answer", {"text": "2"}))
    assert smollm2.format(list(turn.calls)).startswith('<tool_call>[{"name": "calculate"')
    assert smollm2.parse(smollm2.format(list(turn.calls))).calls == turn.calls
    assert hermes.parse(smollm2.format(list(turn.calls))).calls == turn.calls  # Hermes reads a list too
    assert "an empty list" in smollm2.parse("<tool_call>[]</tool_call>").problem

    env = ArithmeticEnvironment(seed=0, n_tasks=10)
    compact = CompactParser(env.tools())
    assert compact.parse("calculate[ 2 * 3]").calls == (ToolCall("calculate", {"expression": "2 * 3"}),)
    assert compact.format([ToolCall("answer", {"text": "6"})]) == "answer[ 6]"


@pytest.mark.parametrize(
    "text, problem",
    [
        ('<tool_call>{"name": "calculate", "arguments": {"expression": ', "without its </tool_call>"),
        ("<tool_call>{name: calculate}</tool_call>", "not JSON"),
        ("<tool_call>[1, 2]</tool_call>", 'a JSON object with a "name"'),
        ('<tool_call>{"name": "x", "arguments": NaN}</tool_call>', "not JSON"),
        ("<tool_call>" + "[" * 5000 + "</tool_call>", "not JSON"),
    ],
)
def test_malformed_calls_are_problems_never_exceptions(text, problem):
    assert problem in HermesParser().parse(text).problem


def test_the_parser_is_detected_from_the_template_or_named_beside_the_model(family, tmp_path):
    name, path = family
    _, tokenizer = load_policy(path)
    assert detect_parser(tokenizer.chat_template) == PARSER[name]
    assert ChatFormat.for_policy(tokenizer, path).parser_name == PARSER[name]
    (tmp_path / POLICY_FILE).write_text(json.dumps({"tool_parser": "compact"}))
    assert ChatFormat.for_policy(tokenizer, tmp_path).parser_name == "compact"
    (tmp_path / POLICY_FILE).write_text(json.dumps({"tool_parser": "mistral"}))
    with pytest.raises(ChatTemplateError, match="no tool-call parser named 'mistral'"):
        ChatFormat.for_policy(tokenizer, tmp_path)


def test_a_tokenizers_own_response_template_is_used_through_transformers(env):
    """transformers' parse_response, with a response template for the Qwen/Hermes style."""
    from training.policy.parsers import TransformersParser

    template = {
        "defaults": {"role": "assistant"},
        "start_anchor": "<|im_start|>assistant\n",
        "fields": {
            "thinking": {"open": "<think>", "close": "</think>", "content": "text"},
            "tool_calls": {
                "open_pattern": r"\s*<tool_call>",
                "close_pattern": r"</tool_call>\s*|(?=<\|im_end\|>)",
                "repeats": True,
                "content": "json",
                "transform": {"type": "function", "function": "{content}"},
            },
            "content": {"content": "text", "repeats": True, "join": "\n"},
            "_end": {"open": "<|im_end|>", "content": "text", "transform": ""},
        },
    }

    class Tok:  # the tokenizer's method, on a bare object: only parse_response is used
        from transformers import PreTrainedTokenizerBase

        parse_response = PreTrainedTokenizerBase.parse_response
        response_template = template

    assert detect_parser("anything", response_template=template) == "transformers"
    parser = TransformersParser(Tok(), env.tools())
    turn = parser.parse(
        '<think>sum</think>ok\n<tool_call>\n{"name": "calculate", "arguments": {"expression": "1+1"}}\n</tool_call>'
    )
    assert turn.calls == (ToolCall("calculate", {"expression": "1+1"}),) and turn.content == "ok"
    assert parser.parse('<tool_call>{"name": "calculate", arguments}</tool_call>').problem


# --- Rendering and the action mask -----------------------------------------------------------


def test_rollouts_keep_exactly_the_sampled_tokens_as_agent_tokens(family, env):
    """Only sampled tokens are agent tokens, and they are the tokens the model was scored on:
    a forward pass over the stored ids gives back the sampling log-probs. Re-tokenizing the
    decoded episode gives other ids (the trap of TRL issue 5144), so a rollout that
    re-tokenized would train on tokens the model never produced."""
    name, path = family
    model, tokenizer = load_policy(path)
    chat = ChatFormat.for_policy(tokenizer, path)
    runner = EpisodeRunner(env, Limits(max_steps=3))
    episodes = rollout(
        model,
        tokenizer,
        runner,
        env.tasks("train")[:6],
        RolloutConfig(temperature=1.0, max_action_tokens=12, batch_size=6),
        chat=chat,
    )
    retokenized_differs = False
    for e in episodes:
        assert len(e.ids) == len(e.agent_mask) == len(e.logprobs)
        sampled = [lp for lp, agent in zip(e.logprobs, e.agent_mask) if agent]
        assert recomputed_logprobs(model, e) == pytest.approx(sampled, abs=1e-4)
        turns = [m["content"] for m in e.messages if m["role"] == "assistant"]
        assert [chat.decode(span) for span in agent_spans(e)] == turns
        assert all(span[-1] in chat.stop_ids or len(span) == 12 for span in agent_spans(e))
        if tokenizer(tokenizer.decode(e.ids), add_special_tokens=False)["input_ids"] != e.ids:
            retokenized_differs = True
    assert retokenized_differs


def test_context_tokens_are_the_template_s_own_rendering(family, env):
    """What the template adds (headers, tool results, generation prompts) is context, and it is
    the template's text: the episode decodes to the template's rendering of its messages."""
    name, path = family
    _, tokenizer = load_policy(path)
    chat = ChatFormat.for_policy(tokenizer, path)
    runner = EpisodeRunner(env)
    parser = chat.parser(env.tools())
    task = env.tasks("train")[0]

    def script(task, state):
        return iter(
            [
                ("calculate", {"expression": task.metadata["expression"]}),
                MALFORMED[name],
                ("answer", {"text": task.reference}),
            ]
        )

    episode = play_scripted(runner, task, script, parser)
    tools = [t.as_openai() for t in env.tools()]
    ids, mask = episode_tokens(chat, episode, tools)
    rendered = chat.render(episode.messages, tools, add_generation_prompt=False)
    assert rendered.startswith(tokenizer.decode(ids)) and len(rendered) - len(tokenizer.decode(ids)) <= 2
    agent = [
        tokenizer.decode([t for t in span if t not in chat.stop_ids])
        for span in agent_spans(SimpleNamespace(ids=ids, agent_mask=mask))
    ]
    assert agent == [m["content"] for m in episode.messages if m["role"] == "assistant"]
    assert agent[1] == MALFORMED[name] and episode.outcome.correct
    assert [s.get("is_error", False) for s in episode.steps if s["kind"] == "observation"] == [False, True]


def test_a_template_that_rewrites_earlier_turns_is_refused_with_the_reason(env, tmp_path):
    path = chat_model_dir(tmp_path / "model", "qwen2", [env])
    _, tokenizer = load_policy(path)
    # Drops every assistant turn but the last once a tool result follows: not prefix-stable.
    tokenizer.chat_template = (
        "{% for m in messages %}{% if m.role != 'assistant' or loop.last %}<|im_start|>{{ m.role }}\n"
        "{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
        "{% endif %}<tool_call>"
    )
    chat = ChatFormat.for_policy(tokenizer, path)
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
        {"role": "tool", "content": "r"},
    ]
    with pytest.raises(ChatTemplateError, match="renders earlier turns differently"):
        chat.continuation(messages, None, 1)


@pytest.mark.parametrize(
    "turn, message",
    [
        ('<tool_call>{"name": "calculate", "arguments": {"expression": </tool_call>', "not JSON"),
        ('<tool_call>{"name": "browse", "arguments": {}}</tool_call>', "unknown tool 'browse'"),
        ('<tool_call>{"name": "calculate", "arguments": {"expr": "1"}}</tool_call>', "bad arguments for calculate"),
    ],
)
def test_a_malformed_call_is_an_error_observation_that_uses_a_step(env, turn, message):
    """(A turn of plain text is the final answer, as in chat APIs; see docs/policies.md.)"""
    runner = EpisodeRunner(env)
    episode = play_scripted(runner, env.tasks("train")[0], lambda task, state: iter([turn]), HermesParser(env.tools()))
    assert message in episode.messages[-1]["content"] and episode.messages[-1]["role"] == "tool"
    assert episode.outcome.parts["steps"] == 1 and episode.outcome.parts["tool_errors"] == 1
    assert episode.steps[-1]["is_error"] is True


# --- Behaviour cloning, rollouts and PPO of a Qwen2 policy -----------------------------------


def test_a_cloned_qwen2_policy_makes_real_tool_calls_and_ppo_trains_it(cloned_qwen, env, tmp_path):
    model, tokenizer = load_policy(cloned_qwen)
    chat = ChatFormat.for_policy(tokenizer, cloned_qwen)
    runner = EpisodeRunner(env)
    episodes = rollout(
        model,
        tokenizer,
        runner,
        env.tasks("dev")[:8],
        RolloutConfig(temperature=0.0, max_action_tokens=40, batch_size=8),
        chat=chat,
    )
    calls = [s for e in episodes for s in e.steps if s["kind"] == "action" and s["tool"] == "calculate"]
    assert calls and all(isinstance(s["arguments"], dict) for s in calls)  # structured, as an import stores them
    stored = episodes[0].trajectory(agent="qwen")
    assert stored["metadata"]["tools"][0]["function"]["name"] == "calculate"
    assert stored["task"]["environment"] == "arithmetic"

    config = RLConfig(
        iterations=2,
        episodes_per_iteration=8,
        minibatch_size=4,
        epochs=1,
        rollout_batch_size=8,
        eval_every=2,
        eval_samples=1,
        learning_rate=1e-3,
        threads=1,
    )
    result = train_rl(
        policy_dir=cloned_qwen,
        scorer=rubric_scorer(utility=True),
        train_tasks=env.tasks("train"),
        dev_tasks=env.tasks("dev")[:4],
        runner=runner,
        config=config,
        out_dir=tmp_path,
    )
    assert result.stop_reason == "finished" and result.iterations == 2
    last = tmp_path / "checkpoints" / "iter-0002"
    assert json.loads((last / POLICY_FILE).read_text())["tool_parser"] == "hermes"
    tuned, _ = load_policy(last)
    assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), tuned.parameters()))
    assert type(tuned).__name__ == "Qwen2ForCausalLM"


def test_a_rollout_is_stored_as_the_import_of_its_own_chat_transcript_would_be(env):
    """The same episode, played by a policy and logged as an OpenAI chat transcript, gives the
    same canonical steps, system prompt and tools: a rollout of an agent and that agent's
    logged transcripts compare side by side."""
    from annotate.trajectory_formats import parse_trajectory

    task = env.tasks("train")[0]
    expression = task.metadata["expression"]
    turn = f'Let me compute.\n<tool_call>\n{{"name": "calculate", "arguments": {{"expression": "{expression}"}}}}\n</tool_call>'
    runner = EpisodeRunner(env)
    episode = play_scripted(runner, task, lambda task, state: iter([turn, task.reference]), HermesParser(env.tools()))
    tools = [t.as_openai() for t in env.tools()]
    transcript = {
        "task": {"external_id": task.external_id},
        "agent": {"name": "my-agent"},
        "tools": tools,
        "messages": [
            *env.opening_messages(task),
            {
                "role": "assistant",
                "content": "Let me compute.",
                "tool_calls": [
                    {
                        "id": "call_0",
                        "type": "function",
                        "function": {"name": "calculate", "arguments": json.dumps({"expression": expression})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_0", "content": task.reference},
            {"role": "assistant", "content": task.reference},
        ],
    }
    logged, rolled = parse_trajectory(transcript), parse_trajectory(episode.trajectory(agent="my-agent"))
    assert rolled.steps == logged.steps
    assert [s["kind"] for s in rolled.steps] == ["thought", "action", "observation", "answer"]
    assert rolled.metadata["system_prompt"] == logged.metadata["system_prompt"] == env.system_prompt
    assert rolled.metadata["tools"] == logged.metadata["tools"] == tools
    assert rolled.answer == logged.answer == task.reference and episode.outcome.correct
