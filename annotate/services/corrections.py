"""Corrections: a person's fix of one side of a comparison, stored as a new trajectory with its
lineage, and reviewed before it goes into a dataset (docs/corrections.md).

A correction is either the final answer edited (`answer`) or, from an action step or the
answer step of the original on, the tool calls the person chose (`tool_call`: each a tool and its arguments,
checked against the tool's JSON Schema) and then an answer. The steps before the correction
are the original's. Where the task's environment is known, the training app's replayer
(`replayer_register`, set when the app starts) executes the calls in it, records the real
observations and scores the result with the rubric (`replayed`); otherwise the correction is
stored as edited, each call with the observation the person wrote, if any, and marked so.

The corrected trajectory belongs to the policy "human correction" (never to the agent it
corrects, whose figures stay its own) and to the original's task.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jsonschema
from django.conf import settings
from django.db import transaction
from django.db.models import ProtectedError
from django.utils import timezone

from annotate.models import Assignment, Correction, CorrectionReplay, Policy, Trajectory
from annotate.services.assignments import store_allowed
from annotate.services.environment_tools import environment_job_send, environment_tools
from annotate.trajectory_formats import trajectory_hashes
from core.problems import problem
from webapp.errors import ArbiterError
from webapp.jobs import Heartbeat, job_claim, job_finish
from webapp.limits import person_lock

CORRECTION_AGENT = "human correction"
MAX_CALLS = 32
MAX_TEXT = 20_000
MAX_ARGUMENTS = 20_000  # characters of one call's arguments, written as JSON
# A correction's request body: the routes refuse more from its declared length, before reading it
# (webapp/uploads.py, ROUTE_LIMITS).
MAX_BODY_BYTES = settings.CORRECTION_MAX_BODY_BYTES
SIDES = ("left", "right")
# Where a tool-call correction may start: a call (the calls replace it and what follows) or the
# answer (the calls go before a new answer: the commonest fix, a missing `open`).
CORRECTABLE_KINDS = ("action", "answer")


@dataclass(frozen=True)
class CallIn:
    tool: str
    arguments: dict
    observation: str = ""  # what the tool said, written by the person, where nothing can run it


@dataclass(frozen=True)
class CorrectionIn:
    kind: str
    step: int
    calls: list[CallIn] = field(default_factory=list)
    answer: str = ""


@dataclass(frozen=True)
class Replayed:
    """What the environment made of a correction: the steps from the start, the answer, the rubric."""

    steps: list[dict]
    answer: str
    outcome: dict


# The worker's job that plays a correction (training/tasks.py), queued by name.
REPLAY_TASK = "environments.correction_replay"


def _text(value, name: str, problems: list, *, required: bool = False) -> str:
    if value is None or value == "":
        if required:
            problems.append(problem("required.", field=name))
        return ""
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        problems.append(problem(f"text of at most {MAX_TEXT:,} characters.", field=name))
        return ""
    return value


def declared_tools(original: Trajectory) -> list[dict] | None:
    """The tools the corrected calls are checked against: the environment's where a worker has
    described it (`EnvironmentTools`: this process never starts one), else those the original
    declared (its metadata), else None (nothing to check against)."""
    tools = environment_tools(original.task.environment)
    if tools is None:
        tools = (original.metadata or {}).get("tools")
    return tools if isinstance(tools, list) and tools else None


def tool_names(original: Trajectory) -> list[str]:
    """The names of the tools a correction of this trajectory may call (none known: [])."""
    tools = declared_tools(original)
    return sorted(_schemas(tools)) if tools else []


def _schemas(tools: list[dict]) -> dict[str, dict]:
    schemas = {}
    for tool in tools:
        function = tool.get("function", tool) if isinstance(tool, dict) else {}
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            parameters = function.get("parameters")
            schemas[function["name"]] = parameters if isinstance(parameters, dict) else {"type": "object"}
    return schemas


def call_problems(tool: str, arguments, schemas: dict[str, dict] | None, where: str) -> list[dict]:
    """Why a call cannot be stored: an unknown tool, or arguments its JSON Schema refuses."""
    if schemas is None:
        return [] if isinstance(arguments, dict) else [problem("a JSON object.", field=f"{where}.arguments")]
    if tool not in schemas:
        return [
            problem(f"unknown tool {tool[:60]!r}; the tools are {', '.join(sorted(schemas))}.", field=f"{where}.tool")
        ]
    if not isinstance(arguments, dict):
        return [problem(f"the arguments of {tool} are a JSON object.", field=f"{where}.arguments")]
    try:
        validator = jsonschema.Draft202012Validator(schemas[tool])
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    except jsonschema.exceptions.SchemaError:
        return []  # the tool's own schema is broken: nothing to check against
    if not errors:
        return []
    path = ".".join(map(str, errors[0].absolute_path))
    return [problem(f"{tool}: {errors[0].message[:300]}", field=f"{where}.arguments{'.' + path if path else ''}")]


def _size_problems(arguments, where: str) -> list[dict]:
    import json

    try:
        size = len(json.dumps(arguments, ensure_ascii=False))
    except (TypeError, ValueError):
        return [problem("a JSON object.", field=f"{where}.arguments")]
    if size > MAX_ARGUMENTS:
        return [
            problem(f"at most {MAX_ARGUMENTS:,} characters as JSON; these are {size:,}.", field=f"{where}.arguments")
        ]
    return []


def correction_parse(body, *, original: Trajectory) -> CorrectionIn:
    """A correction body checked against the original: {kind: answer, answer} or {kind:
    tool_call, step, calls: [{tool, arguments, observation?}], answer?}. Every problem named."""
    if not isinstance(body, dict):
        raise ArbiterError("Send the correction as a JSON object (kind, step, calls, answer).")
    problems: list[dict] = []
    allowed = {"kind", "step", "calls", "answer", "side"}
    problems += [problem("is not a field of a correction.", field=str(k)[:60]) for k in body if k not in allowed]
    kind = body.get("kind")
    steps = original.steps if isinstance(original.steps, list) else []
    if kind == Correction.Kind.ANSWER:
        answer = _text(body.get("answer"), "answer", problems, required=True)
        if "calls" in body or "step" in body:
            problems.append(problem("an answer correction has no step or calls; use kind tool_call.", field="kind"))
        parsed = CorrectionIn(kind=kind, step=_answer_step(steps), answer=answer)
    elif kind == Correction.Kind.TOOL_CALL:
        step = body.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < len(steps):
            problems.append(
                problem(f"the index of a tool call or the answer of the trajectory (0-{len(steps) - 1}).", field="step")
            )
            step = 0
        elif steps[step].get("kind") not in CORRECTABLE_KINDS:
            problems.append(
                problem(
                    f"step {step} ({str(steps[step].get('kind'))[:40]}) is neither a tool call nor the answer: a "
                    "correction starts at a tool call (your calls replace it) or at the answer (they go before it).",
                    field="step",
                )
            )
        calls = body.get("calls")
        parsed_calls: list[CallIn] = []
        if not isinstance(calls, list) or not calls or len(calls) > MAX_CALLS:
            problems.append(problem(f"a list of 1-{MAX_CALLS} calls, each {{tool, arguments}}.", field="calls"))
        else:
            schemas = _schemas(tools) if (tools := declared_tools(original)) else None
            for i, call in enumerate(calls):
                where = f"calls[{i}]"
                if not isinstance(call, dict):
                    problems.append(problem("an object {tool, arguments, observation?}.", field=where))
                    continue
                problems += [
                    problem("is not a field of a call.", field=f"{where}.{k}"[:80])
                    for k in call
                    if k not in ("tool", "arguments", "observation")
                ]
                tool = call.get("tool")
                if not isinstance(tool, str) or not tool.strip() or len(tool) > 200:
                    problems.append(problem("the tool's name.", field=f"{where}.tool"))
                    continue
                found = call_problems(tool, call.get("arguments", {}), schemas, where) or _size_problems(
                    call.get("arguments", {}), where
                )
                problems += found
                observation = _text(call.get("observation"), f"{where}.observation", problems)
                if not found:
                    parsed_calls.append(CallIn(tool, call.get("arguments", {}), observation))
        answer = _text(body.get("answer"), "answer", problems)
        parsed = CorrectionIn(kind=kind, step=step, calls=parsed_calls, answer=answer)
    else:
        problems.append(problem(f"answer or tool_call; got {str(kind)[:40]!r}.", field="kind"))
        parsed = None
    if problems:
        raise ArbiterError(
            "The correction was not stored: " + "; ".join(f"{p['field']}: {p['message']}" for p in problems[:5]),
            details=problems[:50],
        )
    return parsed


def _answer_step(steps: list) -> int:
    """Where an answer correction starts: the original's answer step (the end when it has none)."""
    for i, step in enumerate(steps):
        if isinstance(step, dict) and step.get("kind") == "answer":
            return i
    return len(steps)


def _edited(original: Trajectory, correction: CorrectionIn) -> tuple[list[dict], str]:
    """The corrected steps without running anything: the original's up to the correction, the
    person's calls (with the observations they wrote), the answer."""
    steps = [dict(s) for s in original.steps[: correction.step]]
    for call in correction.calls:
        steps.append({"kind": "action", "tool": call.tool, "arguments": call.arguments})
        if call.observation:
            steps.append({"kind": "observation", "tool": call.tool, "content": call.observation})
    answer = correction.answer
    if correction.kind == Correction.Kind.TOOL_CALL and not answer:
        return steps, ""
    steps.append({"kind": "answer", "text": answer})
    return steps, answer


@transaction.atomic
def correction_create(
    *, original: Trajectory, correction: CorrectionIn, author, comparison=None, replayer=None
) -> tuple[Correction, str]:
    """Store a correction and its trajectory; returns it with a note on how it was made.

    With a `replayer` (a worker, or a command, where environments run) the correction is played
    now. Without one (the web process, which never starts an environment) it is stored as edited
    and, where its task names an environment, a replay is queued on a worker
    (`correction_replay_run`), which replaces the steps with the played ones."""
    replayed, note = _replay(replayer, original, correction) if replayer is not None else (None, "")
    if replayed is not None:
        steps, answer, outcome = replayed.steps, replayed.answer, replayed.outcome
    else:
        steps, answer = _edited(original, correction)
        outcome = None
    if _same_behaviour(steps, answer, original):
        raise ArbiterError(
            "The correction is the same as the original: the same calls and the same answer. Nothing was stored; "
            "change the answer or a call, or close the form.",
            details=[problem("the same as the original.", field="answer" if correction.kind == "answer" else "calls")],
        )
    trajectory = _trajectory(original, steps, answer, outcome, replayed=replayed is not None, step=correction.step)
    row = Correction.objects.create(
        original=original,
        corrected=trajectory,
        comparison=comparison,
        author=author,
        kind=correction.kind,
        step=correction.step,
        replayed=replayed is not None,
    )
    if replayer is None and original.task.environment:
        job = CorrectionReplay.objects.create(correction=row)
        transaction.on_commit(lambda: _replay_enqueue(job.pk))
        note = f"queued to be played in {original.task.environment} on a worker"
    elif not original.task.environment:
        note = "the task names no environment"
    return row, note


def _replay(replayer, original: Trajectory, correction: CorrectionIn) -> tuple[Replayed | None, str]:
    """The correction played by `replayer`, or None and why it could not be."""
    try:
        result = replayer.replay(original.task, original.steps[: correction.step], correction.calls, correction.answer)
    except Exception as exc:  # noqa: BLE001 - an environment may fail in any way: keep the fix, say why
        result = f"the environment failed while playing it ({type(exc).__name__}: {str(exc)[:200]})"
    return (result, "") if isinstance(result, Replayed) else (None, result)


def _replay_enqueue(job_id: int) -> None:
    """Queue a correction's replay on a worker (training/tasks.py plays it)."""
    environment_job_send(REPLAY_TASK, job_id)


def correction_replay_run(*, job_id: int, replayer) -> None:
    """Play a stored correction in its task's environment (a job on a worker: webapp/jobs.py).
    Played, the correction points at the played trajectory (real observations, the rubric's
    outcome) and the edited one is removed where nothing else holds it; not played, it stays as
    edited and the job's note says why. A failure leaves it as edited, with the reason."""
    if not job_claim(CorrectionReplay, job_id):
        return
    job = CorrectionReplay.objects.select_related("correction__original__task", "correction__corrected").get(pk=job_id)
    row = job.correction
    try:
        with Heartbeat(CorrectionReplay, job_id):
            parsed = _correction_in(row)
            replayed, note = _replay(replayer, row.original, parsed)
            if replayed is not None and _same_behaviour(replayed.steps, replayed.answer, row.original):
                replayed, note = None, "played in the environment, it does what the original did; kept as edited"
            if replayed is not None:
                _replace_corrected(row, replayed)
    except Exception as exc:  # noqa: BLE001 - the job's end is always written, with the reason
        job_finish(
            CorrectionReplay, job_id, status=CorrectionReplay.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000]
        )
        raise
    job_finish(CorrectionReplay, job_id, status=CorrectionReplay.Status.SUCCEEDED, note=note[:2000])


def _correction_in(row: Correction) -> CorrectionIn:
    """The correction as the person gave it, read back from its edited trajectory: the calls
    after the original's steps, with the observations they wrote, and the answer."""
    added = row.corrected.steps[row.step :]
    calls = []
    for i, step in enumerate(added):
        if step.get("kind") == "action":
            following = added[i + 1] if i + 1 < len(added) else {}
            observation = following.get("content", "") if following.get("kind") == "observation" else ""
            calls.append(CallIn(step.get("tool", ""), step.get("arguments") or {}, observation))
    return CorrectionIn(kind=row.kind, step=row.step, calls=calls, answer=row.corrected.answer)


@transaction.atomic
def _replace_corrected(row: Correction, replayed: Replayed) -> None:
    edited = row.corrected
    trajectory = _trajectory(
        row.original, replayed.steps, replayed.answer, replayed.outcome, replayed=True, step=row.step
    )
    if trajectory.outcome is None:  # the played steps are the edited ones (an answer's fix): the same row
        trajectory.outcome = replayed.outcome
        trajectory.metadata = {**trajectory.metadata, "replayed": True}
        trajectory.save(update_fields=["outcome", "metadata", "updated_at"])
    Correction.objects.filter(pk=row.pk).update(corrected=trajectory, replayed=True, updated_at=timezone.now())
    if edited.pk == trajectory.pk:
        return
    try:  # every reference to a trajectory protects it: removed only where nothing else holds it
        with transaction.atomic():
            edited.delete()
    except ProtectedError:
        pass


def replay_state(row: Correction) -> tuple[str, str]:
    """How a correction was made, in words a page and the API share: (state, note). States:
    queued, running (its replay waits for or runs on a worker), replayed, stored as edited
    (with why), failed (the replay's job failed; stored as edited, with the reason)."""
    if row.replayed:
        return "replayed", ""
    job = _replay_job(row)
    if job is None:
        return "stored as edited", ("the task names no environment" if not row.original.task.environment else "")
    if job.status in (CorrectionReplay.Status.QUEUED, CorrectionReplay.Status.RUNNING):
        return job.status, ""
    if job.status == CorrectionReplay.Status.FAILED:
        return "failed", job.error
    return "stored as edited", job.note


def replay_words(row: Correction) -> str:
    """How the correction was made, as the labeling screen and its message say it."""
    state, note = replay_state(row)
    if state == "replayed":
        return "played in the environment"
    if state in ("queued", "running"):
        where = row.original.task.environment
        return f"stored as edited; being played in {where} on a worker ({state})"
    if state == "failed":
        return f"stored as edited: its replay failed ({note[:300]})"
    return f"stored as edited ({note})" if note else "stored as edited"


def _replay_job(row: Correction) -> CorrectionReplay | None:
    """The correction's replay job, if it has one (the reverse one-to-one raises when not)."""
    try:
        return row.replay
    except CorrectionReplay.DoesNotExist:
        return None


def _same_behaviour(steps, answer, original: Trajectory) -> bool:
    """Whether a corrected trajectory decides what the original decided: the same thoughts, the
    same calls (tool and arguments; call ids are names) and the same answer. A no-op, which would
    only fill the review queue. Observations are not decisions: an edited correction has none
    until a worker plays it, and playing the same calls meets the same ones."""

    def decisions(steps, answer) -> list:
        made = [
            (s.get("kind"), s.get("tool"), _canonical(s.get("arguments")), s.get("text"))
            for s in steps
            if isinstance(s, dict) and s.get("kind") in ("thought", "action", "answer")
        ]
        return [made, answer]

    return decisions(steps, answer) == decisions(original.steps, original.answer)


def _canonical(value) -> str:
    import json

    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _trajectory(original: Trajectory, steps, answer, outcome, *, replayed: bool, step: int) -> Trajectory:
    policy, _ = Policy.objects.get_or_create(name=CORRECTION_AGENT, version="")
    task = original.task
    content, behaviour = trajectory_hashes(
        task={"external_id": task.external_id, "prompt": task.prompt},
        agent={"name": CORRECTION_AGENT, "version": ""},
        steps=steps,
        answer=answer,
    )
    kept = {k: v for k, v in (original.metadata or {}).items() if k in ("tools", "system_prompt", "environment")}
    trajectory, _ = Trajectory.objects.get_or_create(
        content_hash=content,
        defaults={
            "task": task,
            "policy": policy,
            "steps": steps,
            "answer": answer,
            "source": Trajectory.Source.CORRECTED,
            "outcome": outcome,
            "behaviour_hash": behaviour,
            "num_steps": len(steps),
            "metadata": {**kept, "corrected_from": original.pk, "corrected_at_step": step, "replayed": replayed},
        },
    )
    return trajectory


def _side(assignment: Assignment, side) -> Trajectory:
    """The trajectory on that side of the annotator's screen."""
    if side not in SIDES:
        raise ArbiterError(
            "side: left or right, the side of the screen to correct.", details=[problem("left or right.", field="side")]
        )
    comparison = assignment.comparison
    a, b = comparison.trajectory_a, comparison.trajectory_b
    return a if (side == "left") == assignment.left_is_a else b


@transaction.atomic
def correction_submit(*, assignment_id: int, annotator, body) -> tuple[Correction, str]:
    """An annotator's correction of one side of a comparison they hold or judged (the screen's
    form and the API send the same body): checked, stored, with the note `correction_create` gives.
    The limits are counted and the correction written in one transaction under a lock on the
    author's row, so a burst of submits at once stores no more than the limits allow."""
    assignment = (
        Assignment.objects.select_related("comparison__task", "comparison__trajectory_a", "comparison__trajectory_b")
        .filter(pk=assignment_id, annotator=annotator)
        .exclude(status=Assignment.Status.EXPIRED)
        .first()
    )
    if assignment is None:
        raise ArbiterError("That comparison is not assigned to you (or its lease expired).")

    store_allowed(assignment, "correction", closed_too=True)
    original = _side(assignment, body.get("side") if isinstance(body, dict) else None)
    _within_limits(annotator, original, assignment.comparison_id)
    return correction_create(
        original=original,
        correction=correction_parse(body, original=original),
        author=annotator,
        comparison=assignment.comparison,
    )


def _within_limits(annotator, original: Trajectory, comparison_id: int) -> None:
    """At most CORRECTIONS_PER_SIDE corrections of one side of a comparison and CORRECTIONS_PER_HOUR an hour, per
    person: a correction plays calls in an environment and waits in the review queue, so the
    lowest role cannot fill either (settings, 5 and 60 by default). Counted under a lock on the
    author's row (`person_lock`), held until the correction is written."""
    from datetime import timedelta

    person_lock(annotator)
    per_side = settings.CORRECTIONS_PER_SIDE
    per_hour = settings.CORRECTIONS_PER_HOUR
    mine = Correction.objects.filter(author=annotator)
    if mine.filter(original=original, comparison_id=comparison_id).count() >= per_side:
        raise ArbiterError(
            f"You have stored {per_side} corrections of this side already; a reviewer reads those first. "
            "Nothing was stored.",
            details=[problem(f"at most {per_side} corrections of one side.", field="side")],
        )
    if mine.filter(created_at__gte=timezone.now() - timedelta(hours=1)).count() >= per_hour:
        raise ArbiterError(
            f"You have stored {per_hour} corrections in the last hour, the most an hour allows; try again later. "
            "Nothing was stored.",
            details=[problem(f"at most {per_hour} corrections an hour.", field="")],
        )


@transaction.atomic
def correction_review(*, correction: Correction, decision: str, reviewer, note: str = "") -> Correction:
    """Accept or reject a correction (a second review changes the decision, with its reviewer)."""
    statuses = {"accept": Correction.Status.ACCEPTED, "reject": Correction.Status.REJECTED}
    if decision not in statuses:
        raise ArbiterError(
            f"decision: accept or reject; got {str(decision)[:40]!r}.",
            details=[problem("accept or reject.", field="decision")],
        )
    if not isinstance(note, str) or len(note) > MAX_TEXT:
        raise ArbiterError("note: text.", details=[problem(f"text of at most {MAX_TEXT:,} characters.", field="note")])
    correction = Correction.objects.select_for_update().get(pk=correction.pk)
    state, _ = replay_state(correction)
    if state in (CorrectionReplay.Status.QUEUED, CorrectionReplay.Status.RUNNING):
        raise ArbiterError(
            f"Correction #{correction.pk} is still being played in its environment ({state} on a worker); review it "
            "when its replay has run, so the decision is on what the environment made of it.",
            details=[problem(f"its replay is {state}.", field="decision")],
        )
    correction.status = statuses[decision]
    correction.reviewed_by, correction.reviewed_at, correction.review_note = reviewer, timezone.now(), note
    correction.save(update_fields=["status", "reviewed_by", "reviewed_at", "review_note", "updated_at"])
    return correction
