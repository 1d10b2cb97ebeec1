"""Tiny randomly initialised chat models of real architectures, with chat templates written for
the tests in the style of their families (no weights can be downloaded here).

    qwen2   Qwen2ForCausalLM, a ChatML template with <tool_call> JSON (the hermes parser)
    llama   LlamaForCausalLM, a Llama 3.1-style template: header ids, ipython tool results,
            tool calls as one JSON object (the llama3_json parser)
    smollm2 LlamaForCausalLM with the template a converted SmolLM2 GGUF gets (SmolLM2's own,
            with the tool prompt training/policy/gguf.py adds; the smollm2 parser)

Each tokenizer is a byte-level BPE trained on a little text of the environments, so
re-tokenizing a sampled turn often gives other tokens than the sampled ones: the trap the
rollout must not fall into (TRL issue 5144).
"""

from __future__ import annotations

from pathlib import Path

from training.policy.gguf import SMOLLM2_WITH_TOOLS

QWEN_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}{% else %}You are a helpful assistant.{% endif %}

# Tools

You are provided with function signatures within <tools></tools> XML tags:
<tools>{% for tool in tools %}
{{ tool | tojson }}{% endfor %}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'assistant' and not message.tool_calls) %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}{% for tc in message.tool_calls %}
<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif message.role == 'tool' %}
{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}<|im_start|>user{% endif %}
<tool_response>
{{ message.content }}
</tool_response>
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}<|im_end|>
{% endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

LLAMA_TEMPLATE = """\
{{- bos_token }}<|start_header_id|>system<|end_header_id|>

{% if messages[0].role == 'system' %}{{ messages[0].content | trim }}{% endif %}
{%- if tools %}

You have access to the following functions. To call a function, respond with JSON for a function call: \
{"name": function name, "parameters": dictionary of argument name and its value}.
{% for t in tools %}{{ t | tojson }}
{% endfor %}{% endif %}<|eot_id|>
{%- for message in messages %}
{%- if message.role == 'user' %}<|start_header_id|>user<|end_header_id|>

{{ message.content | trim }}<|eot_id|>
{%- elif message.role == 'assistant' %}<|start_header_id|>assistant<|end_header_id|>

{{ message.content | trim }}<|eot_id|>
{%- elif message.role == 'tool' %}<|start_header_id|>ipython<|end_header_id|>

{{ message.content }}<|eot_id|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}"""

FAMILIES = {
    "qwen2": {
        "template": QWEN_TEMPLATE,
        "special": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "bos": None,
        "eos": "<|im_end|>",
        "pad": "<|endoftext|>",
    },
    "smollm2": {
        "template": SMOLLM2_WITH_TOOLS,
        "special": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "bos": "<|im_start|>",
        "eos": "<|im_end|>",
        "pad": "<|im_end|>",
    },
    "llama": {
        "template": LLAMA_TEMPLATE,
        "special": [
            "<|begin_of_text|>",
            "<|end_of_text|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|eot_id|>",
            "<|eom_id|>",
            "<|python_tag|>",
            "<|finetune_right_pad_id|>",
        ],
        "bos": "<|begin_of_text|>",
        "eos": "<|eot_id|>",
        "pad": "<|finetune_right_pad_id|>",
    },
}


def _texts(envs) -> list[str]:
    texts = []
    for env in envs:
        for split in ("train", "dev"):
            texts += [t.prompt for t in env.tasks(split)[:200]]
        texts += [str(t.as_openai()) for t in env.tools()]
    texts += [
        '{"name": "calculate", "arguments": {"expression": "12 * 7 - 3"}}',
        '{"name": "answer", "parameters": {"text": "81"}}',
        "<tool_call>\n</tool_call>",
        "<tool_response>",
    ]
    return texts


def chat_model_dir(path: Path, family: str, envs, *, hidden: int = 32, layers: int = 1, seed: int = 0) -> Path:
    """A tiny random `family` model directory with its test chat template (made once per path)."""
    if (path / "config.json").exists():
        return path
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
        set_seed,
    )

    spec = FAMILIES[family]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        _texts(envs),
        trainers.BpeTrainer(
            vocab_size=600,
            special_tokens=spec["special"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=spec["bos"],
        eos_token=spec["eos"],
        pad_token=spec["pad"],
        additional_special_tokens=spec["special"],
    )
    tokenizer.chat_template = spec["template"]
    set_seed(seed)
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    if family == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    else:
        model = LlamaForCausalLM(LlamaConfig(bos_token_id=tokenizer.bos_token_id, **common))
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def agent_spans(episode) -> list[list[int]]:
    """The runs of agent tokens of an episode (anything with `ids` and `agent_mask`), one per turn."""
    spans, current = [], []
    for token, agent in zip(episode.ids, episode.agent_mask):
        if agent:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    return spans + ([current] if current else [])


def registered_qwen(folder: Path, name: str):
    """A tiny Qwen2 chat model of the arithmetic environment's texts, registered as the policy
    `name` through `register_policy`, as a user registers theirs: the Policy."""
    from django.core.management import call_command

    from annotate.models import Policy
    from training.envs.arithmetic import ArithmeticEnvironment

    qwen = chat_model_dir(folder / "qwen", "qwen2", [ArithmeticEnvironment(seed=0, n_tasks=20)])
    call_command("register_policy", str(qwen), "--name", name, "--environment", "arithmetic")
    return Policy.objects.get(name=name)
