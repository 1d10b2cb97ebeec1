"""The "round" run kind: take a loop one round further (the evaluation page's "next round").

Launched on a loop whose latest round is done, it starts the next round from that round's
result: rollouts and comparisons, labels, then reward model, RL, evaluation and audit. With
people's labels the run stops once the round's campaign is built; launched again when people
have labelled it, it trains the round. A round stopped anywhere goes on where it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.urls import reverse

from training.loop.rounds import (
    LABELS,
    MIN_JUDGED,
    active_round_run,
    judged_comparisons,
    latest_round,
    round_advance,
    round_next,
)
from training.models import LoopRound
from webapp.runs.kinds import RunKind, register
from webapp.runs.lineage import lineage_link
from webapp.runs.services import run_add_lineage

STAGES = 9  # rollouts, labels, dataset, reward model, RL, expert iteration, the choice, evaluation, audit


def _help(text: str) -> dict:
    return {"help": text}


@dataclass
class RoundRunConfig:
    loop: str = field(default="", metadata=_help("The loop to take one round further (a run_pipeline --name)."))
    labels: str = field(
        default="simulated",
        metadata=_help(
            "Who labels the new round's comparisons: 'simulated' (annotators by the rubric; the round runs to its end) "
            "or 'people' (the run stops once the round's campaign is built; launch it again when it is labelled)."
        ),
    )

    def validate(self) -> list[str]:
        problems = [] if self.loop.strip() else ["loop: name the loop."]
        if self.labels not in LABELS:
            problems.append(f"labels: one of {', '.join(LABELS)}.")
        return problems


def loop_choices() -> list[tuple[str, str]]:
    loops = LoopRound.objects.order_by("loop").values_list("loop", flat=True).distinct()[:200]
    return [(name, name) for name in loops]


def _check(config: RoundRunConfig) -> list[str]:
    latest = latest_round(config.loop)
    if latest is None:
        return [f"No loop named {config.loop!r} (run_pipeline starts one)."]
    if active_round_run(config.loop) is not None:
        return [f"A round of {config.loop} is already queued or running; wait for it to end."]
    if latest.stage == LoopRound.Stage.LABELLING:
        judged = judged_comparisons(latest.campaign_id)
        if judged < MIN_JUDGED:
            return [
                f"{latest} is waiting for labels: {judged} of {latest.campaign.comparisons.count()} comparisons "
                f"are judged, and its reward model needs at least {MIN_JUDGED}."
            ]
    return []


def _lineage(config: RoundRunConfig) -> list[dict]:
    latest = latest_round(config.loop)
    links = []
    if latest and latest.evaluation_id:
        links.append(
            lineage_link(
                "evaluation", latest.evaluation_id, latest, reverse("training:evaluation", args=[latest.evaluation_id])
            )
        )
    return links


def _execute(*, run, config: RoundRunConfig, reporter, compute, resume_from) -> dict:

    done = [0]

    def stage(title: str):
        index = done[0]
        done[0] += 1

        def progress(fraction: float, message: str = "") -> None:
            reporter.progress(min(0.99, (index + fraction) / STAGES), f"{title}: {message}" if message else title)

        reporter.log(title)
        return progress

    latest = latest_round(config.loop)
    if latest.stage == LoopRound.Stage.DONE:
        latest = round_next(previous=latest, labels=config.labels, user=run.created_by)
        reporter.log(f"{latest} starts from {latest.start_policy} ({latest.labels} labels).")
    round_advance(latest, stage=stage, user=run.created_by, should_stop=reporter.should_stop, train_waiting=True)
    latest.refresh_from_db()
    if latest.evaluation_id:
        run_add_lineage(
            run=run,
            links=[
                lineage_link(
                    "evaluation",
                    latest.evaluation_id,
                    latest,
                    reverse("training:evaluation", args=[latest.evaluation_id]),
                )
            ],
        )
    if latest.stage == LoopRound.Stage.LABELLING:
        message = (
            f"{latest}: {latest.campaign.comparisons.count()} comparisons are waiting for people in "
            f"“{latest.campaign.name}”; launch the round again once they are labelled."
        )
    else:
        message = f"{latest} is done."
    reporter.log(message)
    return {
        "loop": latest.loop,
        "round": latest.number,
        "stage": latest.stage,
        "message": message,
        "campaign_id": latest.campaign_id,
        "evaluation_id": latest.evaluation_id,
        "policy_id": latest.policy_id,
        "audit_campaign_id": latest.audit_campaign_id,
    }


def register_loop_kinds() -> None:
    register(
        RunKind(
            name="round",
            label="Loop round",
            config_class=RoundRunConfig,
            execute=_execute,
            description="Take a loop one round further: roll out its latest policy, label the comparisons (simulated, "
            "or wait for people), retrain the reward model on every label so far, RL with the KL to round "
            "one's start, evaluate, and open a blind audit of what the reward model scores highest.",
            check=_check,
            lineage=_lineage,
            resumable=True,
            choices={"loop": loop_choices, "labels": lambda: [(label, label) for label in LABELS]},
        )
    )
