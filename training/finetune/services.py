"""Django glue for SFT and DPO runs: a snapshot's rows in (the `sft` and `dpo` exports, the
same rows a researcher downloads), a registered policy out, child of the policy it started from."""

from __future__ import annotations

from annotate.exports import iter_rows
from annotate.models import DatasetSnapshot, Policy, SnapshotCorrection, SnapshotPair


def finetune_rows(snapshot: DatasetSnapshot, kind: str, split: str, source: str = "all") -> list[dict]:
    """The snapshot's `kind` export rows of one split; for DPO, `source` keeps the corrections'
    rows ("corrections"), the comparisons' ("pairs") or both ("all")."""
    rows = list(iter_rows(snapshot, kind, split=split))
    if kind == "dpo" and source == "corrections":
        rows = [r for r in rows if r["source"] == "correction"]
    elif kind == "dpo" and source == "pairs":
        rows = [r for r in rows if r["source"] != "correction"]
    return rows


def finetune_snapshot_problems(snapshot_id: int, kind: str, source: str = "all") -> list[str]:
    """Why the snapshot cannot feed an SFT or DPO run, if it cannot (counted without building rows)."""
    snapshot = DatasetSnapshot.objects.filter(pk=snapshot_id).first()
    if snapshot is None:
        return [f"snapshot_id: no dataset snapshot with id {snapshot_id}."]
    if snapshot.status != DatasetSnapshot.Status.SUCCEEDED:
        return [f"snapshot_id: snapshot {snapshot} is {snapshot.status}, not ready."]
    corrections = SnapshotCorrection.objects.filter(snapshot=snapshot, split="train").count()
    pairs = SnapshotPair.objects.filter(snapshot=snapshot, split="train").exclude(preferred="tie").count()
    if kind == "sft" and not corrections:
        return [
            f"snapshot_id: snapshot {snapshot} holds no accepted correction in its training split; SFT learns "
            "from corrections (docs/corrections.md)."
        ]
    if kind == "dpo":
        usable = {"all": corrections + pairs, "corrections": corrections, "pairs": pairs}.get(source, 0)
        if not usable:
            what = {"corrections": "accepted corrections", "pairs": "comparisons with a preferred side"}.get(
                source, "accepted corrections or comparisons with a preferred side"
            )
            return [f"snapshot_id: snapshot {snapshot} has no {what} in its training split for DPO."]
    return []


def finetuned_policy_register(
    *, run, kind: str, start: Policy, snapshot: DatasetSnapshot, name: str, result, config: dict
) -> Policy:
    """The tuned model as a policy (`name`, version `run<id>`), child of the policy it started from."""
    policy, _ = Policy.objects.update_or_create(
        name=name,
        version=f"run{run.pk}",
        defaults={
            "model_dir": result.model_dir,
            "parent": start,
            "run": run,
            "metadata": {
                "finetune": {
                    "kind": kind,
                    "run_id": run.pk,
                    "snapshot_id": snapshot.pk,
                    "snapshot": str(snapshot),
                    "train_rows": result.train_rows,
                    "test_rows": result.test_rows,
                    "skipped": result.skipped,
                    "steps": result.steps,
                    "held_out": result.evaluation,
                    "config": config,
                }
            },
        },
    )
    return policy
