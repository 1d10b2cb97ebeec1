"""A policy checkpoint, written one way by every kind of training (plain Python, no Django).

A checkpoint is a Hugging Face directory any loader reads (`save_pretrained` of the model and
its tokenizer) with the policy's `arbiter_policy.json` beside it (its tool parser: a policy
keeps speaking the format it was trained in), and whatever the run needs to resume (its state
and config as JSON, tensors such as an optimizer's). Behaviour cloning, PPO/RLOO/GRPO, expert
iteration, SFT and DPO, the loop's untrained start and a GGUF conversion all write through
`write_checkpoint`; `carry_policy_file` is its one rule for the tool parser.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from training.policy.chat import POLICY_FILE


def write_checkpoint(
    path: str | Path,
    model,
    tokenizer,
    *,
    policy_dir: str | Path | None = None,
    tool_parser: str = "",
    json_files: dict[str, Any] | None = None,
    tensors: dict[str, Any] | None = None,
    replace: bool = False,
) -> Path:
    """Write `model` and `tokenizer` to `path`, the policy file of `policy_dir` beside them
    (with `tool_parser` set when given), each of `json_files` (name -> value) as JSON and each
    of `tensors` (name -> state dict) with torch.save. `replace` empties `path` first, so a
    checkpoint written again has no file of the one before."""
    path = Path(path)
    if replace and path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    carry_policy_file(policy_dir, path, tool_parser=tool_parser)
    for name, value in (json_files or {}).items():
        (path / name).write_text(json.dumps(value, indent=2, default=str))
    if tensors:
        # Lazy: the web process imports this module (registering a policy) and never loads torch;
        # a caller with tensors to save has loaded it already.
        import torch

        for name, value in tensors.items():
            torch.save(value, path / name)
    return path


def carry_policy_file(policy_dir: str | Path | None, target: str | Path, *, tool_parser: str = "") -> None:
    """The policy file of `policy_dir` (when it has one) copied into `target`, with
    `tool_parser` written into it when given: the tool parser goes with every checkpoint."""
    destination = Path(target) / POLICY_FILE
    source = Path(policy_dir) / POLICY_FILE if policy_dir else None
    source = source if source is not None and source.is_file() else None
    if not tool_parser:
        if source is not None and source.resolve() != destination.resolve():
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination)  # byte for byte: nothing of it rewritten
        return
    base = source or destination  # the policy's own settings, else what the target already says
    info = json.loads(base.read_text()) if base.is_file() else {}
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(json.dumps({**info, "tool_parser": tool_parser}, indent=2, default=str))
