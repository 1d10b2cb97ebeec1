"""An episode as a chat, rendered by the policy's own chat template, token by token.

The tokens of an episode are built in pieces and never re-tokenized:

    opening      render(system + user, tools, add_generation_prompt=True)     context
    action       what the model sampled, up to and with its end-of-turn token  agent
    continuation what the template writes after that turn: the rest of the     context
                 assistant turn, the tool results, the next generation prompt

`continuation` renders the conversation before and after the tool results and keeps the
text the results added (the template must only ever append: a template that rewrites
earlier turns once a tool result follows is refused with that reason). Tokenizing that
text on its own, instead of re-tokenizing the whole conversation, keeps the agent tokens
exactly the ones sampled: re-tokenizing can merge a generated token with the text after it
(TRL issue 5144), which silently shifts the action mask and the log-probs PPO trains on.

Inside the conversation an assistant turn is its raw text (what the model wrote); the
parsed tool calls go to the environment and into the stored trajectory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from training.policy.layout import CHAT_TEMPLATE, LEGACY_TEMPLATES
from training.policy.parsers import PARSERS, ToolCallParser, TransformersParser, detect_parser

# End-of-turn tokens of common chat templates; those the tokenizer knows stop generation.
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")
POLICY_FILE = "arbiter_policy.json"  # beside the model: {"tool_parser": "hermes", ...}


class ChatTemplateError(ValueError):
    """The policy's chat template cannot render episodes as Arbiter needs; the message says why."""


def _stop_ids(tokenizer, model_dir: Path | None) -> list[int]:
    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    vocab = tokenizer.get_vocab()
    special = set(tokenizer.all_special_tokens) | set(getattr(tokenizer, "added_tokens_encoder", {}))
    ids |= {vocab[t] for t in END_OF_TURN if t in vocab and t in special}
    if model_dir is not None and (model_dir / "generation_config.json").exists():
        eos = json.loads((model_dir / "generation_config.json").read_text()).get("eos_token_id")
        ids |= set(eos if isinstance(eos, list) else [eos] if isinstance(eos, int) else [])
    return sorted(ids)


@dataclass
class ChatFormat:
    """How one policy's episodes become tokens, and how its tool calls are read back."""

    tokenizer: object
    parser_name: str
    stop_ids: list[int] = field(default_factory=list)

    @classmethod
    def for_policy(cls, tokenizer, model_dir: str | Path | None = None, *, parser: str = "") -> ChatFormat:
        """The policy's format: its chat template, and the parser named in its directory's
        arbiter_policy.json (`tool_parser`), given here, or detected from the template."""
        path = Path(model_dir) if model_dir else None
        if not parser and path is not None:
            parser = named_tool_parser(path)
        if getattr(tokenizer, "chat_template", None) in LEGACY_TEMPLATES:
            tokenizer.chat_template = CHAT_TEMPLATE  # a default policy saved before tools were declared
        if not getattr(tokenizer, "chat_template", None):
            raise ChatTemplateError(
                "the tokenizer has no chat template; Arbiter renders episodes with the "
                "model's own template (docs/policies.md says what it must provide)."
            )
        parser = parser or detect_parser(
            tokenizer.chat_template, response_template=getattr(tokenizer, "response_template", None)
        )
        if parser not in PARSERS and parser != "transformers":
            raise ChatTemplateError(
                f"no tool-call parser {'named ' + repr(parser) if parser else 'recognises this chat template'}; "
                f"name one of {', '.join([*PARSERS, 'transformers'])} as tool_parser in {POLICY_FILE}."
            )
        stops = _stop_ids(tokenizer, path)
        if not stops:
            raise ChatTemplateError("the tokenizer has no end-of-turn or end-of-text token to stop a turn at.")
        return cls(tokenizer=tokenizer, parser_name=parser, stop_ids=stops)

    def parser(self, tools) -> ToolCallParser:
        if self.parser_name == "transformers":
            return TransformersParser(self.tokenizer, tools)
        return PARSERS[self.parser_name](tools)

    def render(self, messages: list[dict], tools: list[dict] | None, *, add_generation_prompt: bool) -> str:
        try:
            return self.tokenizer.apply_chat_template(
                messages, tools=tools or None, tokenize=False, add_generation_prompt=add_generation_prompt
            )
        except Exception as exc:  # noqa: BLE001 - jinja raises its own errors, and templates raise on purpose
            raise ChatTemplateError(f"the chat template cannot render this episode: {exc}") from exc

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    def opening(self, messages: list[dict], tools: list[dict] | None) -> list[int]:
        return self.encode(self.render(messages, tools, add_generation_prompt=True))

    @cached_property
    def turn_end(self) -> list[int]:
        """The token that closes an assistant turn in this template (found by rendering one),
        fed after a turn the model left unfinished (it ran out of action tokens)."""
        probe = "\u2063probe\u2063"
        try:
            text = self.render(
                [{"role": "user", "content": "?"}, {"role": "assistant", "content": probe}],
                None,
                add_generation_prompt=False,
            )
        except ChatTemplateError:
            text = ""
        after = text[text.find(probe) + len(probe) :] if probe in text else ""
        for i in self.stop_ids:
            token = self.tokenizer.convert_ids_to_tokens(i)
            if token and after.lstrip(" ").startswith(token):
                return [i]
        return [self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else self.stop_ids[0]]

    def continuation(self, messages: list[dict], tools: list[dict] | None, results: int) -> list[int]:
        """Context tokens after the last assistant turn (`messages[-results-1]`, already in the
        tokens up to its end-of-turn token) through its `results` tool messages to the next
        generation prompt."""
        before = self.render(messages[: len(messages) - results], tools, add_generation_prompt=False)
        after = self.render(messages, tools, add_generation_prompt=True)
        if not after.startswith(before):
            raise ChatTemplateError(
                "the chat template renders earlier turns differently once a tool result "
                "follows, so the episode's tokens cannot be extended; Arbiter needs a template "
                "whose rendering only grows (docs/policies.md)."
            )
        stops = [self.tokenizer.convert_ids_to_tokens(i) for i in self.stop_ids]
        cut = max((before.rfind(s) + len(s) for s in stops if s and before.rfind(s) >= 0), default=len(before))
        return self.encode(before[cut:] + after[len(before) :])

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode([i for i in ids if i not in self.stop_ids], skip_special_tokens=False)


def named_tool_parser(model_dir: Path) -> str:
    """The `tool_parser` named in the directory's arbiter_policy.json, or ""."""
    try:
        return json.loads((model_dir / POLICY_FILE).read_text()).get("tool_parser", "") or ""
    except (OSError, ValueError, AttributeError):
        return ""


def tool_parser_of(model_dir: str | Path) -> tuple[str, str]:
    """(parser, how it was chosen) for a policy directory, from its files alone (no model or
    tokenizer is loaded): "named" in arbiter_policy.json, else "detected" from the chat template
    (tokenizer_config.json or chat_template.jinja); ("", "unknown") when neither says."""
    path = Path(model_dir)
    named = named_tool_parser(path)
    if named:
        return named, "named"
    try:
        config = json.loads((path / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        config = {}
    template = config.get("chat_template") if isinstance(config, dict) else None
    if not template and (path / "chat_template.jinja").is_file():
        template = (path / "chat_template.jinja").read_text(errors="replace")
    if isinstance(template, list):  # several named templates: the default one
        template = next((t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"), "")
    if template in LEGACY_TEMPLATES:
        template = CHAT_TEMPLATE
    parser = detect_parser(
        template if isinstance(template, str) else "",
        response_template=config.get("response_template") if isinstance(config, dict) else None,
    )
    return (parser, "detected") if parser else ("", "unknown")
