"""Corrections into training data (issue 33): an accepted correction goes into a snapshot (a
pending or rejected one does not); the `sft` export has it as a conversation with tool calls and
the `dpo` export as a preference row against the original (the steps they share in the prompt)
beside the comparison pairs; both load with their card's code and train with TRL's SFTTrainer
and DPOTrainer."""

from __future__ import annotations

import copy
import json

import pytest

from annotate.exports import export_bundle_dir, iter_rows
from annotate.models import Correction, SnapshotCorrection
from tests.helpers import _tiny_model_and_tokenizer, tiny_trainer_args
from tests.training.correction_fixtures import corrected_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def fixed():
    return corrected_snapshot()


def test_only_accepted_corrections_are_frozen_and_exported(fixed):
    snapshot, made = fixed
    frozen = set(SnapshotCorrection.objects.filter(snapshot=snapshot).values_list("correction_id", flat=True))
    assert frozen == {made[0].pk, made[1].pk} and snapshot.stats["corrections"] == 2
    every = list(iter_rows(snapshot, "sft"))
    rows = [r for r in every if r["origin"] == "correction"]
    assert {r["correction_id"] for r in rows} == frozen
    # The chosen sides of the pairs come beside the corrections, each saying so.
    assert all(r["origin"] == "chosen" and r["correction_id"] is None for r in every if r not in rows)
    for row in rows:
        roles = [m["role"] for m in row["messages"]]
        assert roles[0] == "system" and roles[1] == "user" and "tool" in roles
        assert any(m["tool_calls"] for m in row["messages"] if m["role"] == "assistant")
        assert json.loads(row["tools"]) and row["replayed"] is True
        correction = Correction.objects.get(pk=row["correction_id"])
        assert row["messages"][-1]["content"] == correction.corrected.answer


def test_a_dpo_row_shares_the_steps_before_the_fix_and_prefers_the_fix(fixed):
    snapshot, made = fixed
    rows = list(iter_rows(snapshot, "dpo"))
    fixes = {r["correction_id"]: r for r in rows if r["source"] == "correction"}
    assert set(fixes) == {made[0].pk, made[1].pk}
    answer_fix = fixes[made[0].pk]
    # An answer fix: every call is shared, only the final answers differ.
    assert answer_fix["chosen"][-1]["content"] == made[0].corrected.answer
    assert answer_fix["rejected"][-1]["content"] == made[0].original.answer
    assert len(answer_fix["prompt"]) > 2  # the task, then the shared calls and results
    call_fix = fixes[made[1].pk]
    first = call_fix["chosen"][0]
    assert first["role"] == "assistant" and first["tool_calls"][0]["function"]["name"] == "search"
    assert call_fix["rejected"] and call_fix["chosen"] != call_fix["rejected"]
    pairs = [r for r in rows if r["source"] != "correction"]
    assert pairs and all(r["comparison_id"] and r["correction_id"] is None for r in pairs)


@pytest.mark.parametrize("fmt", ["sft", "dpo"])
def test_the_exports_load_with_the_cards_code_and_train_with_their_trl_trainer(fixed, fmt, tmp_path):
    import torch
    from datasets import Features, load_dataset
    from transformers import LlamaForCausalLM

    snapshot, _ = fixed
    out = tmp_path / fmt
    files = export_bundle_dir(snapshot, fmt, "jsonl", out)
    card = (out / "README.md").read_text()
    assert ("SFTTrainer" if fmt == "sft" else "DPOTrainer") in card
    features = Features.from_dict(json.loads((out / "features.json").read_text()))
    ds = load_dataset(
        "json",
        data_files={s: str(out / "data" / f"{s}.jsonl") for s, n in files.items() if n},
        features=features,
        cache_dir=str(tmp_path / "hf-cache"),
    )
    train = ds["train"] if "train" in ds else ds[next(iter(ds))]
    model, tokenizer = _tiny_model_and_tokenizer(snapshot, fmt, LlamaForCausalLM)
    before = [p.detach().clone() for p in model.parameters()]
    common = tiny_trainer_args(tmp_path / "out", max_length=1024)
    if fmt == "sft":
        from trl import SFTConfig, SFTTrainer

        trainer = SFTTrainer(model=model, args=SFTConfig(**common), train_dataset=train, processing_class=tokenizer)
    else:
        from trl import DPOConfig, DPOTrainer

        trainer = DPOTrainer(
            model=model,
            ref_model=copy.deepcopy(model),
            args=DPOConfig(**common),
            train_dataset=train,
            processing_class=tokenizer,
        )
    result = trainer.train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
