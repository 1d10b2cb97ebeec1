"""Snapshots made from every import format (the trace fixtures as their tools write them, OpenAI
chat, Anthropic Messages, canonical) export, load with their card's code in a clean process
and train with the trainer the card names (TRL's RewardTrainer on `trl`, KTOTrainer on `kto`)."""

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.utils import timezone

from annotate.exports import export_zip
from annotate.models import Assignment, Comparison, Judgement, Policy, Trajectory
from annotate.services.datasets import snapshot_create
from annotate.services.imports import trajectories_import_stream
from tests.factories import CampaignFactory, UserFactory
from tests.helpers import ANTHROPIC, CANONICAL, CHECK_EACH, OPENAI, _tiny_model_and_tokenizer, tiny_trainer_args

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "trace_formats" / "fixtures"
SOURCES = {
    "otel": lambda: (FIXTURES / "otel" / "request.otlp.json").read_bytes(),
    "openinference": lambda: (FIXTURES / "openinference" / "spans.jsonl").read_bytes(),
    "langsmith": lambda: (FIXTURES / "langsmith" / "export.json").read_bytes(),
    "langfuse": lambda: (FIXTURES / "langfuse" / "export.json").read_bytes(),
    "openai": lambda: json.dumps(OPENAI).encode(),
    "anthropic": lambda: json.dumps(ANTHROPIC).encode(),
    "canonical": lambda: json.dumps(CANONICAL).encode(),
}


def _snapshot_of(source: str):
    """Every imported trajectory against rivals on its task (the same steps, another answer),
    judged by two annotators (a source with one task puts every row in one split)."""
    trajectories_import_stream(stream=io.BytesIO(SOURCES[source]()))
    rival_policy = Policy.objects.create(name="rival", version="1")
    campaign = CampaignFactory(votes_per_comparison=2)
    voters = [UserFactory(roles=["annotator"]) for _ in range(2)]
    imported = list(Trajectory.objects.all())
    for i, t in enumerate(imported * 4):  # four rivals each
        steps = [*t.steps[:-1], {"kind": "answer", "text": f"another answer {i}"}]
        rival = Trajectory.objects.create(
            task=t.task,
            policy=rival_policy,
            steps=steps,
            answer=f"another answer {i}",
            num_steps=len(steps),
            content_hash=f"rival-{i}",
            behaviour_hash=f"r{i}",
            metadata=t.metadata,
        )
        comparison = Comparison.objects.create(campaign=campaign, task=t.task, trajectory_a=t, trajectory_b=rival)
        for j, voter in enumerate(voters):
            assignment = Assignment.objects.create(
                comparison=comparison, annotator=voter, left_is_a=True, leased_until=timezone.now(), status="submitted"
            )
            Judgement.objects.create(
                comparison=comparison, annotator=voter, assignment=assignment, choice=1 if i % 2 else 5, seconds=3.0
            )
    return snapshot_create(name=source, campaigns=[campaign], seed=0, test_fraction=0.5)


def _load_with_cards(snapshot, formats: tuple, tmp_path: Path) -> dict:
    """{format: CHECK's counts}: each export's card code run in its folder, all in one clean process."""
    folders = {}
    for fmt in formats:
        bundle = export_zip(snapshot, fmt, "jsonl", tmp_path / f"{fmt}.zip")
        folders[fmt] = tmp_path / fmt
        with zipfile.ZipFile(bundle) as zf:
            zf.extractall(folders[fmt])
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_DATASETS_CACHE=str(tmp_path / "hf" / "datasets"))
    done = subprocess.run(
        [sys.executable, "-c", CHECK_EACH, "jsonl", *map(str, folders.values())],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    return {fmt: counts[str(folder)] for fmt, folder in folders.items()}


@pytest.mark.parametrize("source", SOURCES)
def test_a_snapshot_from_each_import_format_loads_and_trains(source, tmp_path):
    import torch
    from datasets import Features, load_dataset
    from transformers import LlamaForSequenceClassification
    from trl import RewardConfig, RewardTrainer

    snapshot = _snapshot_of(source)
    for fmt, counts in _load_with_cards(snapshot, ("trl", "trl_text", "kto", "raw", "steps"), tmp_path).items():
        if fmt != "steps":  # no first-wrong marks here: the steps export is empty, and says so
            assert sum(counts["all"].values()) > 0, (fmt, counts)
    folder = tmp_path / "trl"
    features = Features.from_dict(json.loads((folder / "features.json").read_text()))
    split = next(p for p in sorted((folder / "data").glob("*.jsonl")))  # one task: one split holds every row
    ds = load_dataset("json", data_files={"rows": str(split)}, features=features, cache_dir=str(tmp_path / "hf-cache"))[
        "rows"
    ]
    model, tokenizer = _tiny_model_and_tokenizer(snapshot, "trl", LlamaForSequenceClassification)
    args = RewardConfig(**tiny_trainer_args(tmp_path / "rm"))
    result = RewardTrainer(model=model, args=args, train_dataset=ds, processing_class=tokenizer).train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))
