"""What a dataset says is true (issue 53): every exported row says who labelled it, the card
counts it; pairs every vote called both bad are flagged and counted; `sft` offers the chosen
sides before any correction; and the card's count of rows over TRL's default `max_length` is
what TRL's RewardTrainer, at its defaults, really drops."""

from __future__ import annotations

import random

import pytest
from django.utils import timezone

from annotate.export_preview import dataset_card_preview
from annotate.export_schemas import FORMATS
from annotate.exports import export_bundle_dir, iter_rows
from annotate.models import Assignment, Judgement, Policy, Trajectory
from annotate.services.datasets import SnapshotFilters, snapshot_create
from tests.annotate.dataset_fixtures import voted_campaign
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

SIMULATED = SnapshotFilters(include_synthetic=True)


def _rows(snapshot, fmt):
    return list(iter_rows(snapshot, fmt))


def test_a_snapshot_of_simulated_judgements_says_so_in_every_row_and_on_the_card():
    campaign, _ = voted_campaign([[1, 2], [5, 4], [2, 1]], synthetic=True, marks={0: (1, None)})
    snapshot = snapshot_create(name="simulated", campaigns=[campaign], filters=SIMULATED, test_fraction=0.0)
    for fmt in FORMATS:
        rows = _rows(snapshot, fmt)
        if fmt == "sft":
            assert rows and {r["origin"] for r in rows} == {"chosen"}
        assert rows, fmt
        assert {r["labelled_by"] for r in rows} == {"simulated"}, fmt
        _, body = dataset_card_preview(snapshot, fmt)
        assert "People's votes only" not in body, fmt
        assert "by simulated annotators" in body.split("## Labelled by")[1].split("##")[0], fmt
        assert "by people" not in body.split("## Labelled by")[1].split("##")[0], fmt
    _, body = dataset_card_preview(snapshot, "trl")
    assert "3 by simulated annotators" in body and "simulated annotators'" in body.split("## Feedback")[1]


def test_people_and_simulated_votes_on_one_pair_are_mixed():
    campaign, comparisons = voted_campaign([[1, 1], [5, 5]])
    bot = UserFactory(is_synthetic=True)
    assignment = Assignment.objects.create(
        comparison=comparisons[0], annotator=bot, left_is_a=True, leased_until=timezone.now(), status="submitted"
    )
    Judgement.objects.create(
        comparison=comparisons[0], annotator=bot, assignment=assignment, choice=1, synthetic=True, seconds=1.0
    )
    snapshot = snapshot_create(name="mixed", campaigns=[campaign], filters=SIMULATED, test_fraction=0.0)
    by_comparison = {r["comparison_id"]: r["labelled_by"] for r in _rows(snapshot, "trl")}
    assert by_comparison == {comparisons[0].pk: "mixed", comparisons[1].pk: "people"}
    raw = {(r["comparison_id"], r["labelled_by"]) for r in _rows(snapshot, "raw")}
    assert (comparisons[0].pk, "simulated") in raw and (comparisons[0].pk, "people") in raw
    _, body = dataset_card_preview(snapshot, "trl")
    section = body.split("## Labelled by")[1].split("##")[0]
    assert "1 by people" in section and "1 by people and simulated annotators together" in section


def test_people_only_snapshots_say_people():
    campaign, _ = voted_campaign([[1, 2], [5, 4]])
    snapshot = snapshot_create(name="people", campaigns=[campaign], test_fraction=0.0)
    assert {r["labelled_by"] for r in _rows(snapshot, "trl")} == {"people"}
    _, body = dataset_card_preview(snapshot, "trl")
    assert "Pairs labelled 2 by people." in body and "synthetic judgements are left out" in body


def test_pairs_every_vote_called_both_bad_are_flagged_counted_and_not_imitated():
    campaign, comparisons = voted_campaign([[1, 2], [5, 4], [2, 1]])
    Judgement.objects.filter(comparison=comparisons[1]).update(both_bad=True)
    Judgement.objects.filter(comparison=comparisons[2], choice=2).update(both_bad=True)  # one vote of two
    snapshot = snapshot_create(name="both bad", campaigns=[campaign], test_fraction=0.0)
    for fmt in ("trl", "trl_text", "dpo"):
        flags = {r["comparison_id"]: r["both_bad"] for r in _rows(snapshot, fmt)}
        assert flags == {comparisons[0].pk: False, comparisons[1].pk: True, comparisons[2].pk: False}, fmt
        _, body = dataset_card_preview(snapshot, fmt)
        assert "1 pairs are rows although every vote on them said both sides were bad" in body, fmt
    sft = _rows(snapshot, "sft")
    chosen = {r["trajectory_id"] for r in sft}
    assert chosen == {comparisons[0].trajectory_a_id, comparisons[2].trajectory_a_id}
    meta, body = dataset_card_preview(snapshot, "sft")
    assert "num_examples: 2" in meta and "1 comparisons where every vote said both sides were bad" in body


# --- TRL at its defaults -----------------------------------------------------------------------


def _policy_with_tokenizer(tmp_path) -> Policy:
    """A policy whose model folder holds a tokenizer like the default policy's (BPE, its chat template)."""
    from tests.rewardmodel.synthetic import tokenizer_texts
    from training.policy.model_io import train_tokenizer

    folder = tmp_path / "policy"
    train_tokenizer(tokenizer_texts(), vocab_size=512).save_pretrained(folder)
    return Policy.objects.create(name="default-bc", model_dir=str(folder))


def _long_steps(words: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    text = " ".join(rng.choice(("search", "result", "river", "bridge", "stone", "answer")) for _ in range(words))
    return [
        {"kind": "action", "tool": "search", "arguments": {"query": "q"}},
        {"kind": "observation", "tool": "search", "content": text},
        {"kind": "answer", "text": "done"},
    ]


@pytest.mark.parametrize("fmt", ["trl_text", "trl"])
def test_the_cards_count_of_dropped_rows_is_what_reward_trainer_drops_at_its_defaults(tmp_path, fmt):
    from datasets import load_dataset
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification, set_seed
    from trl import RewardConfig, RewardTrainer

    campaign, comparisons = voted_campaign([[1, 2]] * 6 + [[5, 4]] * 4)
    policy = _policy_with_tokenizer(tmp_path)
    # Observations of 100 to 2,000 words: some pairs fit in 1,024 tokens, some do not.
    for i, comparison in enumerate(comparisons):
        Trajectory.objects.filter(pk=comparison.trajectory_a_id).update(steps=_long_steps(100 + 210 * i, i))
        Trajectory.objects.filter(pk=comparison.trajectory_b_id).update(steps=_long_steps(120, 100 + i))
    snapshot = snapshot_create(name="long", campaigns=[campaign], test_fraction=0.0)
    export_bundle_dir(snapshot, fmt, "parquet", tmp_path / "bundle")
    card = (tmp_path / "bundle" / "README.md").read_text()
    length = card.split("## Length")[1].split("##")[0]
    assert f"Counted with the tokenizer of default-bc (policy {policy.pk}): of 10 rows" in length
    dropped = int(length.split("of 10 rows, ")[1].split(" would be dropped")[0])
    assert 0 < dropped < 10  # the test means something only where TRL keeps some and drops some

    ds = load_dataset(
        "parquet", data_files={"train": str(tmp_path / "bundle" / "data" / "train.parquet")}, cache_dir=str(tmp_path)
    )["train"]
    tokenizer = AutoTokenizer.from_pretrained(policy.model_dir)
    set_seed(0)
    model = LlamaForSequenceClassification(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            num_labels=1,
            pad_token_id=tokenizer.pad_token_id,
        )
    )
    # TRL's defaults but for what a CPU needs (no bf16) and what a test keeps (no reports, no saves).
    args = RewardConfig(output_dir=str(tmp_path / "rm"), bf16=False, report_to=[], save_strategy="no")
    assert args.max_length == 1024
    trainer = RewardTrainer(model=model, args=args, train_dataset=ds, processing_class=tokenizer)
    assert len(trainer.train_dataset) == 10 - dropped


def test_the_snapshot_page_says_empty_on_a_download_with_no_row_and_who_labelled_it(client, researcher):
    # No first-wrong-step mark: `steps` is empty; no correction, but `sft` has the chosen sides.
    campaign, _ = voted_campaign([[1, 2], [5, 4]], synthetic=True)
    snapshot = snapshot_create(name="page", campaigns=[campaign], filters=SIMULATED, test_fraction=0.0)
    client.force_login(researcher)
    page = client.get(f"/annotate/datasets/{snapshot.id}/").content.decode()
    rows = {row.split("</code>")[0]: row for row in page.split("<tr><td><code>")[1:]}
    assert "(empty)" in rows["steps"] and rows["steps"].count("(empty)") == 3  # the format and both links
    for fmt in ("trl", "trl_text", "kto", "raw", "sft", "dpo"):
        assert "(empty)" not in rows[fmt].split("</tr>")[0], fmt
    labelled = page.split('id="labelled-by">')[1].split("<")[0]
    assert labelled == "Pairs labelled 2 by simulated annotators."


def test_a_large_export_counts_an_even_sample_and_says_about(tmp_path):
    from annotate.export_lengths import COUNT_MAX_ROWS, count_stride, length_counts, load_policy_tokenizer

    assert (count_stride(COUNT_MAX_ROWS), count_stride(COUNT_MAX_ROWS + 1)) == (1, 2)
    assert count_stride(100_000) == 100_000 // COUNT_MAX_ROWS
    counter = load_policy_tokenizer(_policy_with_tokenizer(tmp_path))
    long, short = " ".join(["river bridge"] * 700), "river"
    # Rows 0, 2, 4 are long; row 1 too, which a stride of 2 does not see.
    rows = [{"prompt": "Q: ", "chosen": long if i in (0, 1, 2, 4) else short, "rejected": short} for i in range(8)]
    exact = length_counts(iter(rows), "trl_text", counter)
    assert (exact["rows"], exact["dropped"], exact["counted"]) == (8, 4, 8)
    sampled = length_counts(iter(rows), "trl_text", counter, stride=2)
    assert (sampled["rows"], sampled["dropped"], sampled["counted"], sampled["stride"]) == (8, 6, 4, 2)
    from annotate.export_card import length_section

    assert (
        "of 8 rows, about 6 would be dropped at TRL's default (estimated from one row in every 2: 4 rows tokenized)"
        in length_section("trl_text", sampled)
    )
    assert "no policy with a model folder" in length_section("trl", length_counts(iter(rows), "trl", None))
