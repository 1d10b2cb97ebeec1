"""The default policy's chat format: a compact one, declared by its chat template and parser.

    <|bos|><|user|>{question}<|end|>
    <|assistant|>{action}<|end|>          the action and its <|end|> are agent tokens
    <|tool|>{observation}<|end|>          environment tokens
    ... one assistant/tool pair per step, the last action being answer[ ...]

System messages are not rendered (a 1M-parameter policy gains nothing from them). Actions
are written `tool[ argument]` (the `compact` parser, training/policy/tool_calls.py); text
arguments get a space after the bracket (`search[ Ilse Marrow]`): a byte-level BPE gives a
word different tokens with and without a leading space, and in the question and the pages
names always follow a space, so only this spelling lets the policy copy them token for token.

The policy goes through the same chat rendering and parsing as any Hugging Face model
(training/policy/chat.py); only its template and parser are its own.
"""

from __future__ import annotations

SPECIAL_TOKENS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|end|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] != 'system' %}"
    "<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
TOOL_PARSER = "compact"
# The template of policies saved before tools were declared: it rendered a system message,
# which this format leaves out. Loading such a policy swaps in CHAT_TEMPLATE (same tokens otherwise).
LEGACY_TEMPLATES = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}",
)
