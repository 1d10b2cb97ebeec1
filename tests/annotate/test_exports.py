"""Exports: the formats load with `datasets`, `trl` trains with TRL's RewardTrainer and `kto` with
its KTOTrainer as they are, `steps` is stepwise supervision, re-exports are byte-identical,
annotators are pseudonymized, bad requests are refused."""

import copy
import io
import json
import zipfile

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from annotate.export_schemas import SCHEMAS
from annotate.exports import export_bundle_dir, export_file, export_zip, iter_rows, kto_labels
from annotate.models import DatasetSnapshot, Judgement, Trajectory
from annotate.services.datasets import snapshot_create
from tests.annotate.dataset_fixtures import voted_campaign
from tests.helpers import SYSTEM_PROMPT, TOOLS, _tiny_model_and_tokenizer, tiny_trainer_args
from webapp.errors import ArbiterError

pytestmark = pytest.mark.django_db


def test_trl_rows_keep_tool_calls_structured(snapshot):
    rows = list(iter_rows(snapshot, "trl"))
    assert len(rows) == 18
    row = next(r for r in rows if any(m["tool_calls"] for m in r["chosen"]))
    calls = next(m for m in row["chosen"] if m["tool_calls"])
    assert [c["function"]["name"] for c in calls["tool_calls"]] == ["search", "open"]  # parallel calls, one turn
    assert json.loads(calls["tool_calls"][0]["function"]["arguments"]) == {"query": "Veloran"}
    assert [m["role"] for m in row["chosen"]] == ["assistant", "tool", "tool", "assistant"]
    assert row["prompt"][0]["role"] == "user" and row["margin"] >= 0 and row["split"] in ("train", "test")


def test_trl_rows_carry_the_system_prompt_and_the_tools(agent_snapshot):
    rows = list(iter_rows(agent_snapshot, "trl"))
    with_tools = [r for r in rows if json.loads(r["tools"]) is not None]
    assert len(with_tools) == 17
    row = with_tools[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["prompt"][0]["content"] == SYSTEM_PROMPT
    assert json.loads(row["tools"]) == TOOLS
    bare = next(r for r in rows if r["tools"] == "null")  # JSON null: TRL gives the template no tools
    assert [m["role"] for m in bare["prompt"]] == ["user"]
    text = next(iter_rows(agent_snapshot, "trl_text"))
    assert text["prompt"].startswith(f"System: {SYSTEM_PROMPT}\nUser: ")


def test_trl_exports_load_with_datasets(snapshot, tmp_path):
    from datasets import load_dataset

    for filetype in ("jsonl", "parquet"):
        out = tmp_path / filetype
        files = export_bundle_dir(snapshot, "trl", filetype, out)
        loader = "json" if filetype == "jsonl" else "parquet"
        ds = load_dataset(
            loader,
            data_files={s: str(out / "data" / f"{s}.{filetype}") for s in files},
            cache_dir=str(tmp_path / "hf-cache"),
        )
        assert ds["train"].num_rows == files["train"] and ds["test"].num_rows == files["test"]
        assert set(ds["train"].column_names) >= {"prompt", "chosen", "rejected", "tools", "margin", "comparison_id"}
        # No tools anywhere still loads `tools` as strings ("null"), the type a split with tools has.
        assert ds["train"].features["tools"].dtype == ds["test"].features["tools"].dtype == "string"
        # No task on both sides of the split.
        assert not set(ds["train"]["task_id"]) & set(ds["test"]["task_id"])
        card = (out / "README.md").read_text()
        assert card.startswith("---\n") and f"content_hash: {snapshot.content_hash}" in card
        manifest = json.loads((out / "manifest.json").read_text())
        assert set(manifest["files"]) == {
            "README.md",
            "features.json",
            f"data/train.{filetype}",
            f"data/test.{filetype}",
        }


def test_a_tiny_reward_model_trains_on_the_trl_export_with_reward_trainer(agent_snapshot, tmp_path):
    import torch
    from datasets import load_dataset
    from transformers import LlamaForSequenceClassification
    from trl import RewardConfig, RewardTrainer

    out = tmp_path / "bundle"
    export_bundle_dir(agent_snapshot, "trl", "parquet", out)
    ds = load_dataset(
        "parquet", data_files={"train": str(out / "data" / "train.parquet")}, cache_dir=str(tmp_path / "hf-cache")
    )["train"]
    assert ds[0]["prompt"][0]["role"] in ("system", "user") and "tools" in ds.column_names
    model, tokenizer = _tiny_model_and_tokenizer(agent_snapshot, "trl", LlamaForSequenceClassification)
    before = [p.detach().clone() for p in model.parameters()]
    args = RewardConfig(**tiny_trainer_args(tmp_path / "rm", steps=4, batch=4))
    trainer = RewardTrainer(model=model, args=args, train_dataset=ds, processing_class=tokenizer)
    # The system prompt and the tools reach the chat template: the rendered sequences hold them.
    toolbox, system = tokenizer.convert_tokens_to_ids("toolbox"), tokenizer.convert_tokens_to_ids("Quillwort")
    ids = trainer.train_dataset["chosen_ids"]
    assert sum(toolbox in x for x in ids) == sum(json.loads(r["tools"]) is not None for r in ds) > 0
    assert sum(system in x for x in ids) == sum(r["prompt"][0]["role"] == "system" for r in ds)
    result = trainer.train()
    assert result.global_step == 4 and torch.isfinite(torch.tensor(result.training_loss))
    assert any(not torch.equal(b, a) for b, a in zip(before, model.parameters()))


def test_kto_labels_follow_the_documented_rule():
    assert kto_labels(choice=1, both_bad=False) == {"A": True, "B": False}  # strong: loser undesirable
    assert kto_labels(choice=2, both_bad=False) == {"A": True}  # slight: only the winner
    assert kto_labels(choice=4, both_bad=False) == {"B": True}
    assert kto_labels(choice=5, both_bad=False) == {"B": True, "A": False}
    assert kto_labels(choice=3, both_bad=False) == {}  # a tie gives nothing
    assert kto_labels(choice=3, both_bad=True) == {"A": False, "B": False}
    assert kto_labels(choice=1, both_bad=True) == {"A": False, "B": False}


def test_kto_rows_come_from_each_judgement(agent_snapshot):
    # Votes per comparison: [1, 2], [5, 4], [2, 2], [4, 5], [1, 1], [5, 5] (x3): 3+3+2+3+4+4 rows each round.
    rows = list(iter_rows(agent_snapshot, "kto"))
    assert len(rows) == 19 * 3
    assert sum(r["label"] for r in rows) == 12 * 3 and sum(not r["label"] for r in rows) == 7 * 3
    for r in rows:
        assert r["prompt"][-1]["role"] == "user" and r["completion"][0]["role"] == "assistant"
        assert r["label"] == kto_labels(choice=r["choice"], both_bad=r["both_bad"])[r["side"]]
        assert r["annotator"].startswith("annotator-")
    first = min(r["judgement_id"] for r in rows if r["choice"] == 2)
    Judgement.objects.filter(pk=first).update(both_bad=True)
    after = [r for r in iter_rows(agent_snapshot, "kto") if r["judgement_id"] == first]
    assert [(r["side"], r["label"]) for r in after] == [("A", False), ("B", False)]


def test_a_tiny_model_trains_on_the_kto_export_with_kto_trainer(agent_snapshot, tmp_path):
    import torch
    from datasets import load_dataset
    from transformers import LlamaForCausalLM
    from trl import KTOConfig, KTOTrainer

    files = {}
    for filetype in ("jsonl", "parquet"):
        out = tmp_path / filetype
        files[filetype] = export_bundle_dir(agent_snapshot, "kto", filetype, out)
        loader = "json" if filetype == "jsonl" else "parquet"
        ds = load_dataset(
            loader,
            data_files={s: str(out / "data" / f"{s}.{filetype}") for s in files[filetype]},
            cache_dir=str(tmp_path / "hf-cache"),
        )
        assert ds["train"].num_rows == files[filetype]["train"] and ds["test"].num_rows == files[filetype]["test"]
        assert ds["train"].features["label"].dtype == "bool" and ds["train"].features["tools"].dtype == "string"
        assert not set(ds["train"]["task_id"]) & set(ds["test"]["task_id"])
        card = (out / "README.md").read_text()
        assert "KTOTrainer" in card and "tie (choice 3) gives no row" in card
    train = ds["train"]
    model, tokenizer = _tiny_model_and_tokenizer(agent_snapshot, "kto", LlamaForCausalLM)
    before = [p.detach().clone() for p in model.parameters()]
    args = KTOConfig(
        output_dir=str(tmp_path / "kto"),
        max_steps=2,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        bf16=False,
        gradient_checkpointing=False,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        max_length=512,
        dataset_num_proc=None,
    )
    ref_model = copy.deepcopy(model)  # a tiny model has no hub id to load the reference from
    trainer = KTOTrainer(model=model, ref_model=ref_model, args=args, train_dataset=train, processing_class=tokenizer)
    result = trainer.train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))
    assert any(not torch.equal(b, a) for b, a in zip(before, model.parameters()))


def test_steps_export_is_stepwise_supervision(snapshot, tmp_path):
    from datasets import load_dataset

    out = tmp_path / "steps"
    files = export_bundle_dir(snapshot, "steps", "parquet", out)
    ds = load_dataset(
        "parquet",
        data_files={s: str(out / "data" / f"{s}.parquet") for s in files},
        cache_dir=str(tmp_path / "hf-cache"),
    )
    rows = [r for split in ds for r in ds[split]]
    assert len(rows) == 2
    features = ds["train"].features
    assert features["prompt"].dtype == "string"
    assert features["completions"].feature.dtype == "string" and features["labels"].feature.dtype == "bool"
    for r in rows:  # one label per step; good steps, then the first wrong one last
        assert isinstance(r["prompt"], str) and len(r["completions"]) == len(r["labels"]) > 0
        assert r["labels"] == [True] * (len(r["labels"]) - 1) + [False]
        assert all(isinstance(c, str) and c for c in r["completions"])
    assert "TRL 1.16 has no trainer" in (out / "README.md").read_text()


def test_re_exporting_gives_byte_identical_files(snapshot, tmp_path):
    for fmt in ("trl", "trl_text", "kto", "raw", "steps"):
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
    call_command(
        "export_dataset", str(snapshot.pk), "--format", "trl", "--out", str(tmp_path / "p.parquet"), stdout=out
    )
    assert "Wrote 18 rows" in out.getvalue()
    call_command(
        "export_dataset",
        str(snapshot.pk),
        "--format",
        "raw",
        "--out",
        str(tmp_path / "r.zip"),
        "--filetype",
        "jsonl",
        stdout=out,
    )
    names = zipfile.ZipFile(tmp_path / "r.zip").namelist()
    assert sorted(names) == ["README.md", "data/test.jsonl", "data/train.jsonl", "features.json", "manifest.json"]
    call_command("export_dataset", str(snapshot.pk), "--format", "steps", "--out", str(tmp_path / "folder"), stdout=out)
    assert (tmp_path / "folder" / "manifest.json").exists()
    with pytest.raises(CommandError, match="No snapshot with id"):
        call_command("export_dataset", "999999", "--format", "trl", "--out", str(tmp_path / "x.jsonl"))
    with pytest.raises(CommandError, match="use .jsonl"):
        call_command("export_dataset", str(snapshot.pk), "--format", "trl", "--out", str(tmp_path / "x.csv"))


def test_raw_copy_path_gives_the_same_rows_as_the_python_path(snapshot, tmp_path):
    from annotate.export_copy import RawCopyBatches
    from annotate.exports import write_rows

    fast = tmp_path / "fast.jsonl"
    RawCopyBatches(snapshot, None).write(fast, "jsonl")
    slow = tmp_path / "slow.jsonl"
    write_rows(iter_rows(snapshot, "raw"), slow, "raw", "jsonl")

    def load(path):
        return [json.loads(line) for line in path.read_text().splitlines()]

    assert load(fast) == load(slow) and len(load(fast)) == 36
    # Ratings are a typed list, never JSON text to decode a second time.
    assert all(isinstance(r["ratings"], list) for r in load(fast))
    parquet = tmp_path / "fast.parquet"
    RawCopyBatches(snapshot, "test").write(parquet, "parquet")
    table = pq.read_table(parquet)
    assert set(table.column("split").to_pylist()) == {"test"}
    assert table.schema.equals(SCHEMAS["raw"])


def test_an_empty_split_exports_no_file(tmp_path):
    campaign, _ = voted_campaign([[1, 2], [5, 4]])
    snapshot = snapshot_create(name="all-train", campaigns=[campaign], test_fraction=0.0)
    for fmt in ("trl", "kto", "raw", "steps"):
        files = export_bundle_dir(snapshot, fmt, "parquet", tmp_path / fmt)
        assert files["test"] == 0 and not (tmp_path / fmt / "data" / "test.parquet").exists()
    files = export_bundle_dir(snapshot, "raw", "jsonl", tmp_path / "raw-jsonl")
    assert files == {"train": 4, "test": 0} and not (tmp_path / "raw-jsonl" / "data" / "test.jsonl").exists()
    assert pq.read_table(tmp_path / "raw" / "data" / "train.parquet").num_rows == 4


def test_an_empty_split_has_no_file_and_the_bundle_still_loads(snapshot, tmp_path):
    """`datasets` cannot load an empty split file, so the bundle leaves it out and says so."""
    import datasets

    campaign = snapshot.campaigns.get()
    everything_train = snapshot_create(name="all train", campaigns=[campaign], test_fraction=0.0, seed=1)
    for filetype in ("jsonl", "parquet"):
        out = tmp_path / filetype
        files = export_bundle_dir(everything_train, "trl", filetype, out)
        assert files["test"] == 0 and not (out / "data" / f"test.{filetype}").exists()
        assert json.loads((out / "manifest.json").read_text())["empty_splits"] == ["test"]
        loaded = datasets.load_dataset(
            "json" if filetype == "jsonl" else "parquet", data_files={"train": str(out / "data" / f"train.{filetype}")}
        )
        assert loaded["train"].num_rows == files["train"] > 0
        assert '"test"' not in (out / "README.md").read_text()


def test_raw_ratings_are_typed_rows_on_both_paths(snapshot, tmp_path):
    from annotate.export_copy import RawCopyBatches
    from annotate.exports import write_rows
    from annotate.models import Judgement, SnapshotJudgement

    judgement_id = SnapshotJudgement.objects.filter(snapshot=snapshot).order_by("judgement_id").first().judgement_id
    Judgement.objects.filter(pk=judgement_id).update(ratings={"speed": {"B": 2}, "correctness": {"A": 4, "B": 1}})
    expected = [
        {"dimension": "correctness", "side": "A", "value": 4},
        {"dimension": "correctness", "side": "B", "value": 1},
        {"dimension": "speed", "side": "B", "value": 2},
    ]
    fast, slow, parquet = tmp_path / "fast.jsonl", tmp_path / "slow.jsonl", tmp_path / "fast.parquet"
    RawCopyBatches(snapshot, None).write(fast, "jsonl")
    write_rows(iter_rows(snapshot, "raw"), slow, "raw", "jsonl")
    RawCopyBatches(snapshot, None).write(parquet, "parquet")
    for rows in ([json.loads(line) for line in path.read_text().splitlines()] for path in (fast, slow)):
        assert next(r for r in rows if r["judgement_id"] == judgement_id)["ratings"] == expected
    table = pq.read_table(parquet).to_pylist()
    assert next(r for r in table if r["judgement_id"] == judgement_id)["ratings"] == expected


def test_the_tools_column_is_always_the_openai_function_form(agent_snapshot):
    """Tools recorded as Anthropic's, MCP's or the flat GenAI form are exported as OpenAI's; the
    stored form stays as imported."""
    forms = [
        {"name": "search", "description": "Search.", "input_schema": {"type": "object"}},  # Anthropic
        {"type": "function", "name": "open", "description": "Open.", "parameters": {"type": "object"}},  # GenAI
        {"name": "fetch", "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}}}},  # MCP
        TOOLS[0],  # already OpenAI's
    ]
    for t in Trajectory.objects.all():
        t.metadata = {**t.metadata, "tools": forms}
        t.save(update_fields=["metadata"])
    row = next(r for r in iter_rows(agent_snapshot, "trl") if json.loads(r["tools"]))
    tools = json.loads(row["tools"])
    assert all(t["type"] == "function" and set(t["function"]) >= {"name", "parameters"} for t in tools)
    assert [t["function"]["name"] for t in tools] == ["search", "open", "fetch", "search"]
    assert tools[2]["function"]["parameters"]["properties"]["url"] == {"type": "string"}
    assert Trajectory.objects.first().metadata["tools"][0]["input_schema"] == {"type": "object"}


def test_the_snapshot_freezes_each_judgements_task_and_shown_side(snapshot):
    """The `raw` export reads the snapshot's rows and the judgements only: the task's id and the
    side shown left are frozen into the snapshot's rows when it is built, equal to the live ones."""
    from annotate.export_copy import RawCopyBatches
    from annotate.models import SnapshotJudgement

    members = SnapshotJudgement.objects.filter(snapshot=snapshot).select_related(
        "judgement__comparison__task", "judgement__assignment"
    )
    assert members.count() == 36
    for member in members:
        assert member.task_external_id == member.judgement.comparison.task.external_id
        assert member.left_is_a == (member.judgement.assignment.left_is_a if member.judgement.assignment else None)
    assert {m.left_is_a for m in members} == {True, False}
    sql = RawCopyBatches(snapshot, None).copy_sql()
    assert "annotate_task" not in sql and "annotate_comparison" not in sql and "annotate_assignment" not in sql


def test_the_migration_backfills_snapshots_frozen_before_it(snapshot):
    """Snapshots built before the frozen columns existed get them from the live rows."""
    import importlib

    from django.db import connection

    from annotate.models import SnapshotJudgement

    migration = importlib.import_module("annotate.migrations.0014_snapshot_judgement_frozen_columns")
    frozen = dict(SnapshotJudgement.objects.values_list("id", "task_external_id"))
    shown = dict(SnapshotJudgement.objects.values_list("id", "left_is_a"))
    SnapshotJudgement.objects.update(task_external_id="", left_is_a=None)  # as the migration finds them
    with connection.cursor() as cursor:
        cursor.execute(migration.BACKFILL)
    assert dict(SnapshotJudgement.objects.values_list("id", "task_external_id")) == frozen
    assert dict(SnapshotJudgement.objects.values_list("id", "left_is_a")) == shown


def test_ties_are_no_trl_rows_and_the_card_says_how_many_were_left_out(tmp_path):
    """TRL trains every row as "chosen beats rejected": a kept tie (margin 0) would be taught as a
    preference. The TRL-ready formats leave ties out whatever the snapshot keeps, the card and its
    preview count them, and the raw export still holds their judgements."""
    from annotate.export_preview import dataset_card_preview

    campaign, _ = voted_campaign([[1, 2], [3, 3], [5, 4], [3, 3], [2, 3]])
    snapshot = snapshot_create(name="with ties", campaigns=[campaign], test_fraction=0.0, ties="keep")
    assert snapshot.stats["ties"] == snapshot.stats["train_ties"] == 2
    for fmt in ("trl", "trl_text", "dpo"):
        rows = list(iter_rows(snapshot, fmt))
        assert rows and all(row.get("preferred") != "tie" for row in rows), fmt
        assert all(row.get("margin", 1) > 0 for row in rows), fmt
    files = export_bundle_dir(snapshot, "trl", "parquet", tmp_path / "trl")
    assert files["train"] == 3 == pq.read_table(tmp_path / "trl" / "data" / "train.parquet").num_rows
    card = (tmp_path / "trl" / "README.md").read_text()
    assert "2 tied pairs of the snapshot are not rows here" in card and "`raw`" in card
    meta, body = dataset_card_preview(snapshot, "trl")
    assert "num_examples: 3" in meta and "2 tied pairs" in body
    raw = list(iter_rows(snapshot, "raw"))
    assert sum(row["choice"] == 3 for row in raw) == 5  # every tied vote is still there


def test_the_trl_ready_cards_say_the_length_to_set_and_why():
    """Issue 45: TRL's trainers default to max_length=1024; with agents' trajectories the
    RewardTrainer drops long pairs (an empty dataset), DPO cuts the completions' end, KTO the
    labelled completion. Each TRL-ready card names its trainer's config to change."""
    from annotate.export_preview import dataset_card_preview

    campaign, _ = voted_campaign([[1, 2], [5, 4], [2, 1]])
    snapshot = snapshot_create(name="lengths", campaigns=[campaign], test_fraction=0.0)
    expected = {"trl": "RewardConfig(max_length=None)", "trl_text": "RewardConfig(max_length=None)"}
    expected |= {"dpo": "DPOConfig(max_length=None)", "kto": "KTOConfig(max_length=None)"}
    for fmt, config in expected.items():
        _, body = dataset_card_preview(snapshot, fmt)
        length = body.split("## Length")[1].split("##")[0]
        assert config in length and "1,024" in length, fmt
    assert "## Length" not in dataset_card_preview(snapshot, "raw")[1]
