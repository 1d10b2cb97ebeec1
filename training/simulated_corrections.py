"""Simulated corrections, for the loop's comparison of DPO and SFT with the reward model and RL
(`run_pipeline --compare-dpo`): a simulated annotator who knows how to do the task fixes
trajectories the rubric marks wrong, as a person would on the labeling screen.

For each chosen trajectory the environment's demonstrator (its scripted agent) plays the task;
only a demonstration the rubric marks right is used (a person checks their own fix). The fix
starts at the first call where the trajectory and the demonstration part: the demonstration's
calls from there and its answer (a `tool_call` correction), or, where every call was the
demonstration's, the answer alone (an `answer` correction). It is stored and replayed in the
environment through the same service the screen and the API use (`correction_create`), and
reviewed by the rubric's outcome of the replay, as an admin reading both outcomes on the
Corrections page would: accepted when right, else rejected with the reason.
"""

from __future__ import annotations

import random

from annotate.models import Comparison, Correction, Trajectory
from annotate.services.corrections import CallIn, CorrectionIn, correction_create, correction_review
from training.envs.base import INVALID_TOOL, EpisodeRunner
from training.envs.replay import EnvironmentReplayer
from training.envs.services import environment_get
from training.policy.episodes import play_scripted
from training.policy.parsers import HermesParser
from training.simulation import simulated_annotators_ensure

DEMONSTRATION_TRIES = 3  # seeds of the demonstrator tried for a right demonstration of a task


def _actions(steps: list[dict]) -> list[tuple[int, str, object]]:
    return [
        (i, s.get("tool"), s.get("arguments"))
        for i, s in enumerate(steps)
        if isinstance(s, dict) and s.get("kind") == "action"
    ]


def correction_from_demonstration(original_steps: list[dict], demonstration_steps: list[dict], answer: str):
    """The fix a person following the demonstration makes (a CorrectionIn), or None where the
    original already did exactly what the demonstration did."""
    theirs, ours = _actions(original_steps), _actions(demonstration_steps)
    k = 0
    while k < min(len(theirs), len(ours)) and theirs[k][1:] == ours[k][1:] and theirs[k][1] != INVALID_TOOL:
        k += 1
    answer_at = next(
        (i for i, s in enumerate(original_steps) if isinstance(s, dict) and s.get("kind") == "answer"),
        len(original_steps),
    )
    if k == len(ours) == len(theirs):
        given = next((s.get("text") for s in original_steps if isinstance(s, dict) and s.get("kind") == "answer"), None)
        return None if given == answer else CorrectionIn(kind="answer", step=answer_at, answer=answer)
    step = theirs[k][0] if k < len(theirs) else answer_at
    calls = [CallIn(tool=str(tool), arguments=arguments) for _, tool, arguments in ours[k:]]
    return CorrectionIn(kind="tool_call", step=step, calls=calls, answer=answer)


class Demonstrations:
    """A right demonstration of each task asked for, from the environment's demonstrator."""

    def __init__(self, environment: str, seed: int):

        self.env = environment_get(environment)
        self.runner = EpisodeRunner(self.env)
        self.seed = seed
        self._tasks = {t.external_id: t for split in ("train", "dev", "eval") for t in self.env.tasks(split)}

    def right(self, external_id: str) -> tuple[list[dict], str] | None:

        task = self._tasks.get(external_id)
        if task is None:
            return None
        parser = HermesParser(list(self.runner.tools.values()))  # any tool's arguments, written and read back
        for attempt in range(DEMONSTRATION_TRIES):
            turns = self.env.demonstrator(seed=self.seed * 100 + attempt, mistakes=None)
            if turns is None:
                return None
            played = play_scripted(self.runner, task, turns, parser)
            if played.outcome is not None and played.outcome.correct:
                return list(played.steps), played.episode.record.answer or ""
        return None


def campaign_simulate_corrections(*, campaign, environment: str, limit: int, seed: int = 0, reviewer=None) -> dict:
    """Up to `limit` corrections in the campaign (counting those it has), one wrong trajectory per
    task, in a seeded order; each reviewed by its replay's rubric outcome. Returns counts."""
    made = Correction.objects.filter(comparison__campaign=campaign).count()
    counts = {"made": 0, "accepted": 0, "rejected": 0, "no_demonstration": 0, "already_right": 0}
    if made >= limit:
        return counts
    author = simulated_annotators_ensure(count=1)[0]
    corrected_tasks = set(
        Correction.objects.filter(comparison__campaign=campaign).values_list("original__task_id", flat=True)
    )
    sides: dict[int, list[tuple[int, Comparison]]] = {}  # task -> (trajectory, the comparison it is in)
    for comparison in Comparison.objects.filter(campaign=campaign).order_by("pk"):
        for trajectory_id in (comparison.trajectory_a_id, comparison.trajectory_b_id):
            sides.setdefault(comparison.task_id, []).append((trajectory_id, comparison))
    rng = random.Random(seed)
    task_ids = sorted(set(sides) - corrected_tasks)
    rng.shuffle(task_ids)
    demonstrations = Demonstrations(environment, seed)
    replayer = EnvironmentReplayer()  # this runs on a worker: each fix is played now
    for task_id in task_ids:
        if made >= limit:
            break
        choices = sides[task_id]
        rng.shuffle(choices)
        originals = Trajectory.objects.in_bulk([t for t, _ in choices])
        picked = next(
            ((originals[t], c) for t, c in choices if (originals[t].outcome or {}).get("correct") is False), None
        )
        if picked is None:
            continue
        original, comparison = picked
        demonstration = demonstrations.right(original.task.external_id)
        if demonstration is None:
            counts["no_demonstration"] += 1
            continue
        fix = correction_from_demonstration(original.steps, *demonstration)
        if fix is None:
            counts["already_right"] += 1
            continue
        correction, note = correction_create(
            original=original, correction=fix, author=author, comparison=comparison, replayer=replayer
        )
        right = correction.replayed and (correction.corrected.outcome or {}).get("correct") is True
        correction_review(
            correction=correction,
            decision="accept" if right else "reject",
            reviewer=reviewer,
            note="the replay is right by the rubric" if right else (note or "the replay is not right by the rubric"),
        )
        made += 1
        counts["made"] += 1
        counts["accepted" if right else "rejected"] += 1
    return counts
