"""A snapshot holding people's corrections (issue 33), for the export and fine-tuning tests."""

from __future__ import annotations

from annotate.judgement_input import Verdict
from annotate.preferences import task_split
from annotate.services.assignments import assignment_next, judgement_submit
from annotate.services.corrections import CallIn, CorrectionIn, correction_create, correction_review
from annotate.services.datasets import snapshot_create
from tests.factories import CampaignFactory, UserFactory
from training.envs.replay import EnvironmentReplayer
from training.simulation import scripted_trajectories_generate

SEED, TEST_FRACTION = 1, 0.3  # the snapshot's split


def _fix(original, *, call: bool) -> CorrectionIn:
    """The right answer; with `call`, a search for the question first, from the original's first call."""
    reference = original.task.reference_answer
    if call:
        step = next(i for i, s in enumerate(original.steps) if s["kind"] == "action" and s["tool"] != "invalid")
        return CorrectionIn(
            kind="tool_call", step=step, calls=[CallIn("search", {"query": original.task.prompt})], answer=reference
        )
    step = next((i for i, s in enumerate(original.steps) if s["kind"] == "answer"), len(original.steps))
    return CorrectionIn(kind="answer", step=step, answer=reference)


def corrected_snapshot():
    """Eight encyclopedia tasks judged by one person, three corrections (an answer and a tool call
    accepted, one rejected), frozen."""
    campaign = CampaignFactory(votes_per_comparison=1)
    scripted_trajectories_generate(campaign=campaign, n_tasks=8, samples_per_agent=2, seed=5)
    person, admin = UserFactory(roles=["annotator"]), UserFactory(roles=["admin"])
    made = []
    while (a := assignment_next(campaign=campaign, annotator=person)) is not None:
        judgement_submit(assignment_id=a.id, annotator=person, verdict=Verdict(choice=2))
        # a side whose answer is not already the reference (an unchanged answer is no correction);
        # the two that are accepted on tasks of the snapshot's training split, which SFT learns from
        sides = (a.comparison.trajectory_b, a.comparison.trajectory_a)
        original = next((t for t in sides if t.answer != t.task.reference_answer), None)
        training = task_split(a.comparison.task.external_id, seed=SEED, test_fraction=TEST_FRACTION) == "train"
        if len(made) < 3 and original is not None and (training or len(made) == 2):
            made.append(
                correction_create(
                    original=original,
                    correction=_fix(original, call=len(made) == 1),
                    author=person,
                    comparison=a.comparison,
                    replayer=EnvironmentReplayer(),  # played now, as a worker plays it
                )[0]
            )
    for correction, decision in zip(made, ("accept", "accept", "reject")):
        correction_review(correction=correction, decision=decision, reviewer=admin)
    snapshot = snapshot_create(name="with fixes", campaigns=[campaign], test_fraction=TEST_FRACTION, seed=SEED)
    return snapshot, made
