"""How long a policy's turns and episodes may be: the defaults and the ranges of every config
that plays episodes (rollout, best-of-n, evaluation, PPO/RLOO/GRPO, the loop), written once.
Plain Python, so the web process checks a launch without importing torch."""

from __future__ import annotations

from dataclasses import field

from core.config_ranges import out_of_range

MAX_ACTION_TOKENS = 48  # the default policy's turns are short; a chat model writing JSON calls needs more
MAX_CONTEXT = 1536
RANGES = {"max_action_tokens": (1, 8192), "max_context": (16, 262_144)}
ACTION_TOKENS_HELP = "Tokens one turn may generate (raise it for chat models that write JSON tool calls)."
CONTEXT_HELP = "An episode longer than this many tokens ends as truncated."


def max_action_tokens_field():
    return field(default=MAX_ACTION_TOKENS, metadata={"help": ACTION_TOKENS_HELP})


def max_context_field():
    return field(default=MAX_CONTEXT, metadata={"help": CONTEXT_HELP})


def limits_problems(config) -> list[str]:
    """A problem for a `max_action_tokens` or `max_context` of `config` outside its range."""
    return out_of_range(config, RANGES)


def add_limit_arguments(parser, *, max_action_tokens: int = MAX_ACTION_TOKENS, max_context: int = MAX_CONTEXT) -> None:
    """`--max-action-tokens` and `--max-context` on a management command, with these defaults."""
    parser.add_argument("--max-action-tokens", type=int, default=max_action_tokens, help=ACTION_TOKENS_HELP)
    parser.add_argument("--max-context", type=int, default=max_context, help=CONTEXT_HELP)
