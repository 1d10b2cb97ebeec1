"""Run kinds that fine-tune a policy straight from a snapshot: `sft` on accepted corrections and
`dpo` on corrections and preference pairs (training/finetune/)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from django.urls import reverse

from annotate.models import DatasetSnapshot, Policy
from core.callbacks import Callbacks
from training.finetune.config import DPO_LOSSES, DPO_SOURCES, DPOSettings, FinetuneConfig
from training.finetune.services import finetune_rows, finetune_snapshot_problems, finetuned_policy_register
from training.finetune.train import finetune
from training.policy.chat import tool_parser_of
from training.run_kinds.common import policy_choices, policy_link, policy_problems
from webapp.errors import ArbiterError
from webapp.runs.kinds import RunKind, register
from webapp.runs.lineage import lineage_link
from webapp.runs.services import RunCancelled, run_add_artifact, run_add_lineage, run_dir


def _help(text: str) -> dict:
    return {"help": text}


def _plain_name_problem(name: str) -> list[str]:
    if not name.strip() or "/" in name or name.startswith(".") or len(name) > 150:
        return ["policy_name: a plain name (letters, digits, dashes), at most 150 characters."]
    return []


@dataclass
class SFTRunConfig(FinetuneConfig):
    policy_id: int = field(default=0, metadata=_help("The policy to fine-tune (any registered chat policy)."))
    snapshot_id: int = field(default=0, metadata=_help("The dataset snapshot whose accepted corrections it learns."))
    policy_name: str = field(default="sft", metadata=_help("The tuned policy is registered as NAME, version runID."))

    def finetune_config(self) -> FinetuneConfig:
        return FinetuneConfig(**{f.name: getattr(self, f.name) for f in fields(FinetuneConfig)})

    def validate(self) -> list[str]:
        return super().validate() + _plain_name_problem(self.policy_name)


@dataclass
class DPORunConfig(SFTRunConfig, DPOSettings):
    snapshot_id: int = field(
        default=0, metadata=_help("The dataset snapshot: its corrections and its comparisons' preferred sides.")
    )
    learning_rate: float = field(
        default=2e-5,
        metadata=_help(
            "AdamW learning rate (constant). DPO of the default policy on the loop's data: 2e-5 for 3 epochs kept "
            "its dev success where 5e-5 lost 5 points (benchmarks/RESULTS.md, issue 33)."
        ),
    )
    policy_name: str = field(default="dpo", metadata=_help("The tuned policy is registered as NAME, version runID."))

    def dpo_settings(self) -> DPOSettings:
        return DPOSettings(**{f.name: getattr(self, f.name) for f in fields(DPOSettings)})

    def validate(self) -> list[str]:
        return super().validate() + DPOSettings.validate(self)


def _snapshot_choices():
    return [(s.pk, str(s)) for s in DatasetSnapshot.objects.filter(status="succeeded").order_by("-created_at")[:200]]


def _check(kind: str):
    def check(config) -> list[str]:

        problems = [f"policy_id: {p}" for p in policy_problems(config.policy_id)]
        problems += finetune_snapshot_problems(config.snapshot_id, kind, getattr(config, "source", "all"))
        if not problems:
            problems += _format_problems(Policy.objects.get(pk=config.policy_id))
        return problems

    return check


def _format_problems(policy: Policy) -> list[str]:
    """Why the policy's tool-call format cannot be known, if it cannot: read from its files alone
    (`tool_parser_of`), so the web process loads no tokenizer or transformers to check a launch."""
    parser, _ = tool_parser_of(policy.model_dir)
    if not parser:
        return [
            f"policy_id: {policy} cannot be fine-tuned in its own format: no parser recognises its chat "
            "template; name one as tool_parser in arbiter_policy.json (docs/policies.md)."
        ]
    return []


def _lineage(config) -> list[dict]:
    snapshot = DatasetSnapshot.objects.get(pk=config.snapshot_id)
    return [
        policy_link(config.policy_id),
        lineage_link("dataset", snapshot.pk, snapshot, reverse("annotate:dataset", args=[snapshot.pk])),
    ]


def _execute(kind: str):
    def execute(*, run, config, reporter, compute, resume_from) -> dict:

        start = Policy.objects.get(pk=config.policy_id)
        snapshot = DatasetSnapshot.objects.get(pk=config.snapshot_id)
        source = getattr(config, "source", "all")
        train_rows = finetune_rows(snapshot, kind, "train", source)
        test_rows = finetune_rows(snapshot, kind, "test", source)
        reporter.log(
            f"{kind.upper()} of {start} on {snapshot}: {len(train_rows)} training rows, {len(test_rows)} held out"
            + (f" ({source})" if kind == "dpo" else "")
            + f", on {compute.name}."
        )
        callbacks = Callbacks(
            progress=lambda f, m="": reporter.progress(0.97 * f, m or "training"),
            metrics=reporter.metrics,
            log=reporter.log,
            should_stop=reporter.should_stop,
            checkpoint=reporter.checkpoint,
        )
        out = run_dir(run) / kind
        try:
            result = finetune(
                kind,
                policy_dir=start.model_dir,
                train_rows=train_rows,
                test_rows=test_rows,
                config=config.finetune_config(),
                dpo=config.dpo_settings() if kind == "dpo" else None,
                out_dir=out,
                callbacks=callbacks,
                resume_from=resume_from,
                device=compute.device,
            )
        except ValueError as exc:
            raise ArbiterError(str(exc)) from None
        if result.cancelled:
            raise RunCancelled()
        policy = finetuned_policy_register(
            run=run,
            kind=kind,
            start=start,
            snapshot=snapshot,
            name=config.policy_name,
            result=result,
            config=asdict(config),
        )
        run_add_lineage(run=run, links=[policy_link(policy.pk, "output")])
        run_add_artifact(run=run, name="policy", path=out / "model")
        held_out = {
            k.removeprefix("eval_"): v
            for k, v in result.evaluation.items()
            if "runtime" not in k and "per_second" not in k
        }
        if held_out:
            shown = ", ".join(
                f"{k} {held_out[k]:.3g}" for k in ("loss", "rewards/accuracies", "mean_token_accuracy") if k in held_out
            )
            reporter.log(f"Held-out rows: {shown}.")
        return {
            "policy_id": policy.pk,
            "steps": result.steps,
            "train_rows": result.train_rows,
            "test_rows": result.test_rows,
            "skipped": result.skipped,
            "held_out": held_out,
            "seconds": result.seconds,
        }

    return execute


def register_finetune_kinds() -> None:
    register(
        RunKind(
            name="sft",
            label="SFT (corrections)",
            config_class=SFTRunConfig,
            execute=_execute("sft"),
            check=_check("sft"),
            lineage=_lineage,
            resumable=True,
            description="Supervised fine-tuning (TRL's SFTTrainer) of a policy on a snapshot's accepted corrections, "
            "in the policy's own chat format with its tool calls; the loss is on the policy's turns only.",
            choices={"policy_id": policy_choices, "snapshot_id": _snapshot_choices},
        )
    )
    register(
        RunKind(
            name="dpo",
            label="DPO (corrections and preferences)",
            config_class=DPORunConfig,
            execute=_execute("dpo"),
            check=_check("dpo"),
            lineage=_lineage,
            resumable=True,
            description="Direct preference optimisation (TRL's DPOTrainer) of a policy on a snapshot: each correction "
            "against the trajectory it fixes, and each comparison's preferred side against the other; tool results "
            "are masked out of both sides.",
            choices={
                "policy_id": policy_choices,
                "snapshot_id": _snapshot_choices,
                "loss_type": lambda: [(v, v) for v in DPO_LOSSES],
                "source": lambda: [(v, v) for v in DPO_SOURCES],
            },
        )
    )
