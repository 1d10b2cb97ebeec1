"""Exports: the formats load with `datasets`, `trl` trains with TRL's RewardTrainer as it is,
re-exports are byte-identical, annotators are pseudonymized, bad requests are refused."""
import io
import json
import zipfile

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from annotate.exports import SCHEMAS, export_bundle_dir, export_file, export_zip, iter_rows
from annotate.models import DatasetSnapshot
from annotate.services.datasets import snapshot_create
from tests.annotate.dataset_fixtures import voted_campaign
from webapp.errors import ArbiterError

pytestmark = pytest.mark.django_db

TOOL_STEPS = [
    {"kind": "thought", "text": "Search first."},
    {"kind": "action", "tool": "search", "arguments": {"query": "Veloran"}, "call_id": "c1"},
    {"kind": "action", "tool": "open", "arguments": {"n": 0}, "call_id": "c2"},
    {"kind": "observation", "tool": "search", "content": "[0] Veloran Glassworks", "call_id": "c1"},
    {"kind": "observation", "tool": "open", "content": "Founded by Ilse Marrow.", "call_id": "c2"},
    {"kind": "answer", "text": "Ilse Marrow", "quotes": ["Founded by Ilse Marrow."]},
]


@pytest.fixture
def snapshot():
    campaign, comparisons = voted_campaign([[1, 2], [5, 4], [2, 2], [4, 5], [1, 1], [5, 5]] * 3,
                                           marks={0: (None, 2), 1: (1, None)})
    first = comparisons[0].trajectory_a
    first.steps, first.num_steps = TOOL_STEPS, len(TOOL_STEPS)
    first.save()
    return snapshot_create(name="prefs", campaigns=[campaign], test_fraction=0.3, seed=1)


def test_trl_rows_keep_tool_calls_structured(snapshot):
    rows = list(iter_rows(snapshot, "trl"))
    assert len(rows) == 18
    row = next(r for r in rows if any(m["tool_calls"] for m in r["chosen"]))
    calls = next(m for m in row["chosen"] if m["tool_calls"])
    assert [c["function"]["name"] for c in calls["tool_calls"]] == ["search", "open"]  # parallel calls, one turn
    assert json.loads(calls["tool_calls"][0]["function"]["arguments"]) == {"query": "Veloran"}
    assert [m["role"] for m in row["chosen"]] == ["assistant", "tool", "tool", "assistant"]
    assert row["prompt"][0]["role"] == "user" and row["margin"] >= 0 and row["split"] in ("train", "test")


def test_trl_exports_load_with_datasets(snapshot, tmp_path):
    from datasets import load_dataset

    for filetype in ("jsonl", "parquet"):
        out = tmp_path / filetype
        files = export_bundle_dir(snapshot, "trl", filetype, out)
        loader = "json" if filetype == "jsonl" else "parquet"
        ds = load_dataset(loader, data_files={s: str(out / "data" / f"{s}.{filetype}") for s in files},
                          cache_dir=str(tmp_path / "hf-cache"))
        assert ds["train"].num_rows == files["train"] and ds["test"].num_rows == files["test"]
        assert set(ds["train"].column_names) >= {"prompt", "chosen", "rejected", "margin", "comparison_id"}
        # No task on both sides of the split.
        assert not set(ds["train"]["task_id"]) & set(ds["test"]["task_id"])
        card = (out / "README.md").read_text()
        assert card.startswith("---\n") and f"content_hash: {snapshot.content_hash}" in card
        manifest = json.loads((out / "manifest.json").read_text())
        assert set(manifest["files"]) == {"README.md", f"data/train.{filetype}", f"data/test.{filetype}"}


CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] or '' }}"
    "{% if m['tool_calls'] %}{% for c in m['tool_calls'] %}<|call|>{{ c['function']['name'] }}"
    "{{ c['function']['arguments'] }}{% endfor %}{% endif %}<|end|>\n{% endfor %}"
)


def _tiny_tokenizer(texts):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["<unk>", "<pad>", "<eos>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def test_a_tiny_reward_model_trains_on_the_trl_export_with_reward_trainer(snapshot, tmp_path):
    import torch
    from datasets import load_dataset
    from transformers import LlamaConfig, LlamaForSequenceClassification, set_seed
    from trl import RewardConfig, RewardTrainer

    out = tmp_path / "bundle"
    export_bundle_dir(snapshot, "trl", "parquet", out)
    ds = load_dataset("parquet", data_files={"train": str(out / "data" / "train.parquet")},
                      cache_dir=str(tmp_path / "hf-cache"))["train"]
    texts = [json.dumps(r) for r in iter_rows(snapshot, "trl")] + ["<|user|> <|assistant|> <|tool|> <|call|> <|end|>"]
    tokenizer = _tiny_tokenizer(texts)
    set_seed(0)
    model = LlamaForSequenceClassification(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, num_labels=1, pad_token_id=tokenizer.pad_token_id,
    ))
    before = [p.detach().clone() for p in model.parameters()]
    args = RewardConfig(output_dir=str(tmp_path / "rm"), max_steps=4, per_device_train_batch_size=4,
                        learning_rate=1e-3, bf16=False, gradient_checkpointing=False, report_to=[],
                        logging_steps=1, save_strategy="no", max_length=512, dataset_num_proc=None)
    trainer = RewardTrainer(model=model, args=args, train_dataset=ds, processing_class=tokenizer)
    result = trainer.train()
    assert result.global_step == 4 and torch.isfinite(torch.tensor(result.training_loss))
    assert any(not torch.equal(b, a) for b, a in zip(before, model.parameters()))


def test_re_exporting_gives_byte_identical_files(snapshot, tmp_path):
    for fmt in ("trl", "trl_text", "raw", "steps"):
        for filetype in ("jsonl", "parquet"):
            a, b = tmp_path / f"a-{fmt}.{filetype}", tmp_path / f"b-{fmt}.{filetype}"
            export_file(snapshot, fmt, a)
            export_file(snapshot, fmt, b)
            assert a.read_bytes() == b.read_bytes(), (fmt, filetype)
    export_zip(snapshot, "trl", "parquet", tmp_path / "1.zip")
    export_zip(snapshot, "trl", "parquet", tmp_path / "2.zip")
    assert (tmp_path / "1.zip").read_bytes() == (tmp_path / "2.zip").read_bytes()


def test_raw_rows_are_pseudonymized_and_in_a_b_terms(snapshot):
    from webapp.models import User

    rows = list(iter_rows(snapshot, "raw"))
    assert len(rows) == 36
    usernames = set(User.objects.values_list("username", flat=True))
    assert not {r["annotator"] for r in rows} & usernames
    assert all(r["annotator"].startswith("annotator-") for r in rows)
    assert {r["shown_left"] for r in rows} == {"A", "B"}
    first = rows[0]
    assert first["preferred"] == {1: "A", 2: "A", 4: "B", 5: "B", 3: "tie"}[first["choice"]]


def test_steps_rows_label_prefixes_up_to_the_first_wrong_step(snapshot):
    rows = list(iter_rows(snapshot, "steps"))
    by_side = {(r["comparison_id"], r["side"]): r for r in rows}
    assert len(rows) == 2
    marked_b = next(r for r in rows if r["side"] == "B")
    assert marked_b["labels"] == [True, True, False] and len(marked_b["completions"]) == 3
    marked_a = next(r for r in rows if r["side"] == "A")
    assert marked_a["labels"] == [True, False]
    assert len(by_side) == 2


def test_parquet_has_the_declared_schema(snapshot, tmp_path):
    path = tmp_path / "raw.parquet"
    export_file(snapshot, "raw", path)
    table = pq.read_table(path)
    assert table.num_rows == 36 and "annotator" in table.column_names


def test_building_failed_and_unknown_are_refused(snapshot, tmp_path):
    with pytest.raises(ArbiterError, match="Unknown format"):
        export_file(snapshot, "csv", tmp_path / "x.jsonl")
    with pytest.raises(ArbiterError, match="Unknown file type"):
        export_file(snapshot, "trl", tmp_path / "x.csv")
    DatasetSnapshot.objects.filter(pk=snapshot.pk).update(status="running", content_hash="")
    snapshot.refresh_from_db()
    with pytest.raises(ArbiterError, match="still building"):
        export_file(snapshot, "trl", tmp_path / "x.jsonl")


def test_export_dataset_command(snapshot, tmp_path):
    out = io.StringIO()
    call_command("export_dataset", str(snapshot.pk), "--format", "trl", "--out", str(tmp_path / "p.parquet"), stdout=out)
    assert "Wrote 18 rows" in out.getvalue()
    call_command("export_dataset", str(snapshot.pk), "--format", "raw", "--out", str(tmp_path / "r.zip"),
                 "--filetype", "jsonl", stdout=out)
    names = zipfile.ZipFile(tmp_path / "r.zip").namelist()
    assert sorted(names) == ["README.md", "data/test.jsonl", "data/train.jsonl", "manifest.json"]
    call_command("export_dataset", str(snapshot.pk), "--format", "steps", "--out", str(tmp_path / "folder"), stdout=out)
    assert (tmp_path / "folder" / "manifest.json").exists()
    with pytest.raises(CommandError, match="No snapshot with id"):
        call_command("export_dataset", "999999", "--format", "trl", "--out", str(tmp_path / "x.jsonl"))
    with pytest.raises(CommandError, match="use .jsonl"):
        call_command("export_dataset", str(snapshot.pk), "--format", "trl", "--out", str(tmp_path / "x.csv"))


def test_raw_copy_path_gives_the_same_rows_as_the_python_path(snapshot, tmp_path):
    from annotate.exports import RawCopyBatches, write_rows

    fast = tmp_path / "fast.jsonl"
    RawCopyBatches(snapshot, None).write(fast, "jsonl")
    slow = tmp_path / "slow.jsonl"
    write_rows(iter_rows(snapshot, "raw"), slow, "raw", "jsonl")

    def load(path):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for r in rows:
            r["ratings"] = json.loads(r["ratings"])  # JSON text: PostgreSQL spaces it differently
        return rows

    assert load(fast) == load(slow) and len(load(fast)) == 36
    parquet = tmp_path / "fast.parquet"
    RawCopyBatches(snapshot, "test").write(parquet, "parquet")
    table = pq.read_table(parquet)
    assert set(table.column("split").to_pylist()) == {"test"}
    assert table.schema.equals(SCHEMAS["raw"])


def test_an_empty_split_exports_as_an_empty_file(tmp_path):
    campaign, _ = voted_campaign([[1, 2], [5, 4]])
    snapshot = snapshot_create(name="all-train", campaigns=[campaign], test_fraction=0.0)
    for fmt in ("trl", "raw", "steps"):
        files = export_bundle_dir(snapshot, fmt, "parquet", tmp_path / fmt)
        assert files["test"] == 0 and pq.read_table(tmp_path / fmt / "data" / "test.parquet").num_rows == 0
    files = export_bundle_dir(snapshot, "raw", "jsonl", tmp_path / "raw-jsonl")
    assert files == {"train": 4, "test": 0} and (tmp_path / "raw-jsonl" / "data" / "test.jsonl").read_text() == ""
