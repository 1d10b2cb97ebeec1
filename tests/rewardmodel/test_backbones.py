"""Backbones: what each builds, and clear refusals for what cannot be built."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewardmodel.backbones import (
    BackboneError,
    backbone_check,
    build_backbone,
    max_context,
    settle_special_tokens,
)
from rewardmodel.train import RewardModelConfig
from tests.rewardmodel.synthetic import (
    bpe_tokenizer,
    bpe_tokenizer_dir,
    minilm_tokenizer,
)

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_path_is_refused_with_a_reason(tmp_path):
    config = RewardModelConfig(backbone=str(tmp_path / "nowhere"))
    with pytest.raises(BackboneError, match="is no directory"):
        build_backbone(config)
    assert any(p.startswith("backbone:") and "nowhere" in p for p in config.validate())


def test_a_directory_that_is_not_a_model_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(BackboneError, match="no config.json"):
        backbone_check(RewardModelConfig(backbone=str(tmp_path)))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(BackboneError, match="no model weights"):
        backbone_check(RewardModelConfig(backbone=str(tmp_path)))


def test_a_model_type_transformers_does_not_know_fails_to_load_with_backbone_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    bpe_tokenizer().save_pretrained(tmp_path)
    backbone_check(RewardModelConfig(backbone=str(tmp_path)))  # the files are all there...
    with pytest.raises(BackboneError, match="cannot be loaded"):
        build_backbone(RewardModelConfig(backbone=str(tmp_path)))  # ...but no model class reads them


def test_scoring_a_directory_that_holds_no_reward_model_is_refused(tmp_path):
    from rewardmodel.scoring import RewardScorer

    with pytest.raises(BackboneError, match="no config.json"):
        RewardScorer(tmp_path)


def test_policy_llama_needs_a_tokenizer_and_a_sound_shape(tmp_path):
    problems = RewardModelConfig(tokenizer_dir="").validate()
    assert any(p.startswith("tokenizer_dir:") for p in problems)
    problems = RewardModelConfig(tokenizer_dir=str(tmp_path)).validate()
    assert any(p.startswith("tokenizer_dir:") and "no tokenizer" in p for p in problems)
    problems = RewardModelConfig(tokenizer_dir=bpe_tokenizer_dir(), hidden=30, heads=4).validate()
    assert any(p.startswith("hidden:") for p in problems)
    assert RewardModelConfig(tokenizer_dir=bpe_tokenizer_dir()).validate() == []


def test_policy_llama_shares_the_policy_tokenizer_and_knows_its_pad_token():
    model, tokenizer = build_backbone(
        RewardModelConfig(tokenizer_dir=bpe_tokenizer_dir(), hidden=32, layers=1, heads=2, max_length=256)
    )
    assert type(model).__name__ == "LlamaForSequenceClassification"
    assert model.config.num_labels == 1 and model.config.hidden_size == 32
    assert tokenizer.pad_token == "<|pad|>" and tokenizer.eos_token == "<|eos|>"
    assert model.config.pad_token_id == tokenizer.pad_token_id != tokenizer.eos_token_id
    assert tokenizer.padding_side == "right"
    assert max_context(model, tokenizer, 2048) == 256


def test_minilm_loads_offline_ends_texts_with_sep_and_reads_512_tokens():
    model, tokenizer = build_backbone(RewardModelConfig(backbone="minilm"))
    assert type(model).__name__ == "BertForSequenceClassification" and model.config.num_labels == 1
    assert sum(p.numel() for p in model.parameters()) > 20_000_000  # pretrained MiniLM-L6, not a stub
    assert tokenizer.eos_token == "[SEP]" and tokenizer.pad_token == "[PAD]"
    assert max_context(model, tokenizer, 2048) == 512 and max_context(model, tokenizer, 128) == 128


def test_a_tokenizer_without_padding_pads_with_its_end_token():
    from transformers import BertConfig, BertForSequenceClassification

    tokenizer = minilm_tokenizer()
    tokenizer.pad_token = None
    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            num_labels=1,
        )
    )
    settle_special_tokens(model, tokenizer)
    assert tokenizer.eos_token == tokenizer.pad_token == "[SEP]"
    assert model.config.pad_token_id == tokenizer.sep_token_id


def test_validating_a_launch_loads_neither_torch_nor_transformers():
    code = (
        "import sys; from rewardmodel.train import RewardModelConfig; "
        "print(RewardModelConfig(backbone='minilm').validate()); "
        "print(sorted(m for m in ('torch', 'transformers', 'trl') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "[]"]
