"""One way to write a policy checkpoint (training/policy/checkpoints.py), which behaviour cloning,
PPO/RLOO/GRPO, expert iteration, SFT and DPO all call."""

from __future__ import annotations

import json

import pytest
import torch

from training.policy.chat import POLICY_FILE, ChatFormat
from training.policy.checkpoints import carry_policy_file, write_checkpoint
from training.policy.model_io import build_model, load_policy, train_tokenizer

TINY = {"hidden": 32, "layers": 1, "heads": 2}


@pytest.fixture(scope="module")
def policy():
    tokenizer = train_tokenizer(["search('x')", "the answer is 42"] * 20, vocab_size=300)
    return build_model(tokenizer, **TINY), tokenizer


def test_a_checkpoint_loads_back_and_keeps_the_policys_tool_parser(policy, tmp_path):
    model, tokenizer = policy
    start = tmp_path / "start"
    write_checkpoint(start, model, tokenizer, tool_parser="hermes")
    assert json.loads((start / POLICY_FILE).read_text()) == {"tool_parser": "hermes"}
    path = write_checkpoint(
        tmp_path / "iter-0001",
        model,
        tokenizer,
        policy_dir=start,
        json_files={"state.json": {"iteration": 1}},
        tensors={"head.pt": {"w": torch.ones(2)}},
    )
    loaded, _ = load_policy(path)
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))
    assert (path / POLICY_FILE).read_bytes() == (start / POLICY_FILE).read_bytes()  # carried as it was
    assert ChatFormat.for_policy(tokenizer, path).parser_name == "hermes"
    assert json.loads((path / "state.json").read_text()) == {"iteration": 1}
    assert torch.equal(torch.load(path / "head.pt")["w"], torch.ones(2))


def test_writing_again_with_replace_leaves_nothing_of_the_checkpoint_before(policy, tmp_path):
    model, tokenizer = policy
    path = write_checkpoint(tmp_path / "c", model, tokenizer, tensors={"optimizer.pt": {}})
    write_checkpoint(path, model, tokenizer, replace=True)
    assert not (path / "optimizer.pt").exists() and (path / "config.json").exists()


def test_the_policy_file_is_carried_merged_or_left_absent(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    carry_policy_file(source, target)  # the source has none: nothing is invented
    assert not (target / POLICY_FILE).exists()
    (source / POLICY_FILE).write_text(json.dumps({"tool_parser": "compact", "note": "kept"}))
    carry_policy_file(source, target, tool_parser="hermes")
    assert json.loads((target / POLICY_FILE).read_text()) == {"tool_parser": "hermes", "note": "kept"}
    carry_policy_file(target, target, tool_parser="mistral")  # in place, as registering a policy does
    assert json.loads((target / POLICY_FILE).read_text()) == {"tool_parser": "mistral", "note": "kept"}
    carry_policy_file(None, target)
    assert json.loads((target / POLICY_FILE).read_text())["tool_parser"] == "mistral"
