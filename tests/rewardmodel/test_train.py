"""Reward-model training at tiny sizes, for each kind of backbone: it trains, saves, scores
consistently, learns a known preference, stops when asked and resumes from its checkpoint."""

import json
import math
import time
from pathlib import Path

import pytest
import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    set_seed,
)

from rewardmodel.backbones import BackboneError, build_backbone
from rewardmodel.evaluate import pair_metrics
from rewardmodel.scoring import RewardScorer
from rewardmodel.serialize import SERIALIZATION_VERSION
from rewardmodel.train import (
    RewardModelConfig,
    latest_checkpoint,
    train_reward_ensemble,
    train_reward_model,
)
from tests.rewardmodel.rm_fixtures import TINY, Recorder
from tests.rewardmodel.synthetic import bpe_tokenizer, bpe_tokenizer_dir, pairs


def _policy_config(**overrides) -> RewardModelConfig:
    return RewardModelConfig(
        **{
            "tokenizer_dir": bpe_tokenizer_dir(),
            "batch_size": 8,
            "epochs": 1.0,
            "checkpoint_every": 0,
            **TINY,
            **overrides,
        }
    )


def _weights(model) -> dict:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _assert_scores_are_consistent(model_dir: str, rows: list[dict]) -> None:
    """Finite scores, the same whatever the batch (padding is handled), the same from stored steps."""
    scorer = RewardScorer(model_dir)
    chosen, rejected = scorer.score_pairs(rows)
    assert all(math.isfinite(s) for s in chosen + rejected)
    one_by_one, _ = scorer.score_pairs(rows, batch_size=1)
    assert one_by_one == pytest.approx(chosen, abs=1e-4)
    assert len({round(s, 5) for s in chosen + rejected}) > 1  # not a constant


def test_policy_llama_trains_saves_and_scores(tmp_path):
    rows = pairs(24, seed=1)
    config = _policy_config(learning_rate=1e-3)
    recorder = Recorder()
    result = train_reward_model(rows, config, tmp_path, callbacks=recorder)

    assert (result.steps, result.cancelled, result.train_pairs) == (3, False, 24)
    assert result.model_dir == str(tmp_path / "model")
    meta = json.loads((tmp_path / "model" / "arbiter_reward_model.json").read_text())
    assert meta["backbone"] == "policy-llama" and meta["max_tokens"] == 128
    assert meta["serialization_version"] == SERIALIZATION_VERSION and meta["config"]["hidden"] == 32
    assert [step for step, _ in recorder.metric_points] == [1, 2, 3]
    for _, values in recorder.metric_points:
        assert {"train/loss", "train/accuracy", "train/learning_rate", "train/grad_norm"} <= set(values)
        assert all(math.isfinite(v) for v in values.values())
    assert recorder.fractions[-1] == 1.0 and any("parameters" in line for line in recorder.lines)

    set_seed(config.seed)
    initial, _ = build_backbone(config)
    trained = _weights(RewardScorer(result.model_dir).model)
    assert any(not torch.equal(trained[name], value) for name, value in _weights(initial).items())
    _assert_scores_are_consistent(result.model_dir, rows[:6])


def test_minilm_fine_tunes_for_a_step_or_two(tmp_path):
    rows = pairs(6, seed=2)
    config = RewardModelConfig(backbone="minilm", max_length=128, batch_size=4, epochs=1.0, checkpoint_every=0)
    result = train_reward_model(rows, config, tmp_path)
    assert (result.steps, result.cancelled) == (2, False)
    meta = json.loads((Path(result.model_dir) / "arbiter_reward_model.json").read_text())
    assert meta["eos_token"] == "[SEP]" and meta["max_tokens"] == 128
    _assert_scores_are_consistent(result.model_dir, rows)


def test_any_hugging_face_directory_trains_even_without_a_pad_token(tmp_path):
    """A causal LM policy directory whose tokenizer has no pad token (as GPT-2 and most LMs ship)."""
    base = bpe_tokenizer()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=base.backend_tokenizer, eos_token="<|eos|>")
    lm = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=96,
        )
    )
    lm.save_pretrained(tmp_path / "lm")
    tokenizer.save_pretrained(tmp_path / "lm")

    rows = pairs(8, seed=3)
    config = RewardModelConfig(
        backbone=str(tmp_path / "lm"), max_length=512, batch_size=4, epochs=1.0, checkpoint_every=0
    )
    result = train_reward_model(rows, config, tmp_path / "rm")
    assert (result.steps, result.cancelled) == (2, False)
    meta = json.loads((Path(result.model_dir) / "arbiter_reward_model.json").read_text())
    assert meta["max_tokens"] == 96  # the model's own position limit wins over max_length
    _assert_scores_are_consistent(result.model_dir, rows)


def test_policy_llama_learns_which_side_has_no_tool_errors(tmp_path):
    started = time.monotonic()
    config = _policy_config(batch_size=16, epochs=2.0, learning_rate=3e-3)
    result = train_reward_model(pairs(160, seed=10), config, tmp_path)
    chosen, rejected = RewardScorer(result.model_dir).score_pairs(pairs(200, seed=11))
    metrics = pair_metrics(chosen, rejected)
    assert metrics["accuracy"] > 0.8, metrics
    assert time.monotonic() - started < 90


def test_a_run_stops_when_asked_and_saves_no_model(tmp_path):
    recorder = Recorder(stop_after=2)
    result = train_reward_model(pairs(48, seed=4), _policy_config(batch_size=4), tmp_path, callbacks=recorder)
    assert result.cancelled and result.steps <= 3
    assert result.model_dir is None and not (tmp_path / "model").exists()


def test_a_cancelled_run_resumes_from_its_checkpoint_and_ends_where_an_unbroken_one_does(tmp_path):
    rows = pairs(24, seed=5)
    config = _policy_config(batch_size=4, checkpoint_every=2, learning_rate=1e-3)  # 6 steps

    first = Recorder(stop_after=3)
    stopped = train_reward_model(rows, config, tmp_path / "broken", callbacks=first)
    assert stopped.cancelled and stopped.steps == 3
    assert [step for step, _ in first.saved] == [2, 3]  # every 2 steps, and where it was cancelled
    checkpoint = latest_checkpoint(tmp_path / "broken")
    assert checkpoint == first.saved[-1][1] and checkpoint.endswith("checkpoint-3")
    # The older checkpoint is removed only after the newer one was reported (no window in which
    # the run's recorded checkpoint is already deleted).
    assert [p.name for p in (tmp_path / "broken" / "checkpoints").glob("checkpoint-*")] == ["checkpoint-3"]
    assert (Path(checkpoint) / "arbiter_reward_model.json").exists()

    resumed = train_reward_model(rows, config, tmp_path / "broken", resume_from=checkpoint)
    assert (resumed.steps, resumed.cancelled) == (6, False)
    unbroken = train_reward_model(rows, config, tmp_path / "unbroken")
    assert unbroken.steps == 6
    resumed_weights = _weights(RewardScorer(resumed.model_dir).model)
    for name, value in _weights(RewardScorer(unbroken.model_dir).model).items():
        torch.testing.assert_close(resumed_weights[name], value, rtol=1e-4, atol=1e-5)


def test_an_ensemble_trains_its_members_from_their_own_seeds_and_scores_with_their_mean(tmp_path):
    from training.rl.scorers import conservative

    rows = pairs(24, seed=1)
    config = _policy_config(learning_rate=1e-3, ensemble=3)
    result = train_reward_ensemble(rows, config, tmp_path)
    assert (result.cancelled, result.train_pairs, result.steps) == (False, 24, 9)  # 3 steps per member
    meta = json.loads((tmp_path / "model" / "arbiter_reward_model.json").read_text())
    assert meta["members"] == ["members/1", "members/2"]
    scorer = RewardScorer(result.model_dir)
    assert len(scorer.members) == 3
    seeds = [
        json.loads((Path(m) / "arbiter_reward_model.json").read_text())["config"]["seed"]
        for m in (tmp_path / "model", tmp_path / "model" / "members" / "1", tmp_path / "model" / "members" / "2")
    ]
    assert seeds == [0, 1, 2]
    texts = [scorer.episode_texts([("Q?", [{"kind": "answer", "text": f"answer {i}"}])])[0] for i in range(4)]
    by_member = scorer.member_scores(texts)
    assert len({tuple(round(s, 5) for s in member) for member in by_member}) == 3  # three different models
    assert scorer.score_texts(texts) == pytest.approx([sum(s) / 3 for s in zip(*by_member)])
    assert conservative([[1.0, 0.0], [3.0, 0.0]], 1.0) == [1.0, 0.0]  # mean 2 minus spread 1; agreement costs nothing
    # A resumed run trains only the members it lacks.
    (tmp_path / "model" / "arbiter_reward_model.json").write_text(json.dumps({**meta, "members": []}))
    (tmp_path / "model" / "members" / "2" / "arbiter_reward_model.json").unlink()
    again = train_reward_ensemble(rows, config, tmp_path)
    assert again.steps == 3 and json.loads((tmp_path / "model" / "arbiter_reward_model.json").read_text())[
        "members"
    ] == ["members/1", "members/2"]


def test_an_ensemble_member_outside_the_model_directory_is_refused(tmp_path):
    result = train_reward_model(pairs(8, seed=2), _policy_config(), tmp_path)
    meta_file = Path(result.model_dir) / "arbiter_reward_model.json"
    meta_file.write_text(json.dumps({**json.loads(meta_file.read_text()), "members": ["../../elsewhere"]}))
    with pytest.raises(BackboneError, match="outside the model directory"):
        RewardScorer(result.model_dir)


def test_only_ties_leave_nothing_to_train_on(tmp_path):
    rows = [{**row, "margin": 0.0, "preferred": "tie"} for row in pairs(4)]
    with pytest.raises(ValueError, match="No pair with a preferred side"):
        train_reward_model(rows, _policy_config(), tmp_path)


def test_a_reward_model_scores_in_the_view_it_was_trained_in(tmp_path):
    rows = pairs(16, seed=3)
    result = train_reward_model(rows, _policy_config(view="evidence"), tmp_path)
    meta = json.loads((tmp_path / "model" / "arbiter_reward_model.json").read_text())
    assert meta["view"] == "evidence"
    scorer = RewardScorer(result.model_dir)
    assert scorer.view == "evidence"
    steps = [
        {"kind": "action", "tool": "search", "arguments": {"query": "Veloran"}},
        {"kind": "observation", "tool": "search", "content": "[0] Veloran Glassworks"},
        {"kind": "answer", "text": "Ilse Marrow"},
    ]
    (text,) = scorer.episode_texts([("Who founded Veloran?", steps)])
    assert "Action:" not in text and text.startswith("Question: Who founded Veloran?\nRead: [0] Veloran")
    assert "view: one of path, evidence." in _policy_config(view="vibes").validate()
