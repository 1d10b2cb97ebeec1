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
from django.db import transaction
from django.utils import timezone

from annotate.models import Assignment, Correction, Policy, Trajectory
from annotate.trajectory_formats import trajectory_hashes
from webapp.errors import ArbiterError

CORRECTION_AGENT = "human correction"
MAX_CALLS = 32
MAX_TEXT = 20_000
MAX_ARGUMENTS = 20_000  # characters of one call's arguments, written as JSON
MAX_BODY_BYTES = 1_000_000  # a correction's request body (the routes refuse more before reading it)
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


_REPLAYER = None


def replayer_register(replayer) -> None:
    """The training app's replayer: `tools(task) -> [OpenAI tool] | None` and
    `replay(task, prefix, calls, answer) -> Replayed | str` (a str: why it could not run)."""
    global _REPLAYER
    _REPLAYER = replayer


def _problem(field_name: str, message: str) -> dict:
    return {"field": field_name, "message": message}


def _text(value, name: str, problems: list, *, required: bool = False) -> str:
    if value is None or value == "":
        if required:
            problems.append(_problem(name, "required."))
        return ""
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        problems.append(_problem(name, f"text of at most {MAX_TEXT:,} characters."))
        return ""
    return value


def declared_tools(original: Trajectory) -> list[dict] | None:
    """The tools the corrected calls are checked against: the environment's where it is known,
    else those the original declared (its metadata), else None (nothing to check against)."""
    tools = _REPLAYER.tools(original.task) if _REPLAYER else None
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
        return [] if isinstance(arguments, dict) else [_problem(f"{where}.arguments", "a JSON object.")]
    if tool not in schemas:
        return [_problem(f"{where}.tool", f"unknown tool {tool[:60]!r}; the tools are {', '.join(sorted(schemas))}.")]
    if not isinstance(arguments, dict):
        return [_problem(f"{where}.arguments", f"the arguments of {tool} are a JSON object.")]
    try:
        validator = jsonschema.Draft202012Validator(schemas[tool])
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    except jsonschema.exceptions.SchemaError:
        return []  # the tool's own schema is broken: nothing to check against
    if not errors:
        return []
    path = ".".join(map(str, errors[0].absolute_path))
    return [_problem(f"{where}.arguments{'.' + path if path else ''}", f"{tool}: {errors[0].message[:300]}")]


def _size_problems(arguments, where: str) -> list[dict]:
    import json

    try:
        size = len(json.dumps(arguments, ensure_ascii=False))
    except (TypeError, ValueError):
        return [_problem(f"{where}.arguments", "a JSON object.")]
    if size > MAX_ARGUMENTS:
        return [_problem(f"{where}.arguments", f"at most {MAX_ARGUMENTS:,} characters as JSON; these are {size:,}.")]
    return []


def correction_parse(body, *, original: Trajectory) -> CorrectionIn:
    """A correction body checked against the original: {kind: answer, answer} or {kind:
    tool_call, step, calls: [{tool, arguments, observation?}], answer?}. Every problem named."""
    if not isinstance(body, dict):
        raise ArbiterError("Send the correction as a JSON object (kind, step, calls, answer).")
    problems: list[dict] = []
    allowed = {"kind", "step", "calls", "answer", "side"}
    problems += [_problem(str(k)[:60], "is not a field of a correction.") for k in body if k not in allowed]
    kind = body.get("kind")
    steps = original.steps if isinstance(original.steps, list) else []
    if kind == Correction.Kind.ANSWER:
        answer = _text(body.get("answer"), "answer", problems, required=True)
        if "calls" in body or "step" in body:
            problems.append(_problem("kind", "an answer correction has no step or calls; use kind tool_call."))
        parsed = CorrectionIn(kind=kind, step=_answer_step(steps), answer=answer)
    elif kind == Correction.Kind.TOOL_CALL:
        step = body.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < len(steps):
            problems.append(
                _problem("step", f"the index of a tool call or the answer of the trajectory (0-{len(steps) - 1}).")
            )
            step = 0
        elif steps[step].get("kind") not in CORRECTABLE_KINDS:
            problems.append(
                _problem(
                    "step",
                    f"step {step} ({str(steps[step].get('kind'))[:40]}) is neither a tool call nor the answer: a "
                    "correction starts at a tool call (your calls replace it) or at the answer (they go before it).",
                )
            )
        calls = body.get("calls")
        parsed_calls: list[CallIn] = []
        if not isinstance(calls, list) or not calls or len(calls) > MAX_CALLS:
            problems.append(_problem("calls", f"a list of 1-{MAX_CALLS} calls, each {{tool, arguments}}."))
        else:
            schemas = _schemas(tools) if (tools := declared_tools(original)) else None
            for i, call in enumerate(calls):
                where = f"calls[{i}]"
                if not isinstance(call, dict):
                    problems.append(_problem(where, "an object {tool, arguments, observation?}."))
                    continue
                problems += [
                    _problem(f"{where}.{k}"[:80], "is not a field of a call.")
                    for k in call
                    if k not in ("tool", "arguments", "observation")
                ]
                tool = call.get("tool")
                if not isinstance(tool, str) or not tool.strip() or len(tool) > 200:
                    problems.append(_problem(f"{where}.tool", "the tool's name."))
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
        problems.append(_problem("kind", f"answer or tool_call; got {str(kind)[:40]!r}."))
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
    *, original: Trajectory, correction: CorrectionIn, author, comparison=None
) -> tuple[Correction, str]:
    """Store a correction and its trajectory; returns it with a note on how it was made (why it
    was not replayed, when it was not)."""
    note = ""
    replayed = None
    if _REPLAYER is not None:
        try:
            result = _REPLAYER.replay(
                original.task, original.steps[: correction.step], correction.calls, correction.answer
            )
        except Exception as exc:  # noqa: BLE001 - an environment may fail in any way: keep the fix, say why
            result = f"the environment failed while playing it ({type(exc).__name__}: {str(exc)[:200]})"
        if isinstance(result, Replayed):
            replayed = result
        else:
            note = result
    if replayed is not None:
        steps, answer, outcome = replayed.steps, replayed.answer, replayed.outcome
    else:
        steps, answer = _edited(original, correction)
        outcome = None
    if _same_behaviour(steps, answer, original):
        raise ArbiterError(
            "The correction is the same as the original: the same calls and the same answer. Nothing was stored; "
            "change the answer or a call, or close the form.",
            details=[_problem("answer" if correction.kind == "answer" else "calls", "the same as the original.")],
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
    return row, note


def _same_behaviour(steps, answer, original: Trajectory) -> bool:
    """Whether a corrected trajectory does what the original did (the behaviour hash: the same
    calls, results and answer; call ids are names, not behaviour): a no-op, which would only
    fill the review queue."""
    from annotate.trajectory_formats import behaviour_hash

    def behaviour(steps, answer) -> str:
        plain = [{k: v for k, v in s.items() if k != "call_id"} if isinstance(s, dict) else s for s in steps]
        return behaviour_hash(steps=plain, answer=answer)

    return behaviour(steps, answer) == behaviour(original.steps, original.answer)


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
            "side: left or right, the side of the screen to correct.", details=[_problem("side", "left or right.")]
        )
    comparison = assignment.comparison
    a, b = comparison.trajectory_a, comparison.trajectory_b
    return a if (side == "left") == assignment.left_is_a else b


def correction_submit(*, assignment_id: int, annotator, body) -> tuple[Correction, str]:
    """An annotator's correction of one side of a comparison they hold or judged (the screen's
    form and the API send the same body): checked, stored, with the note `correction_create` gives."""
    assignment = (
        Assignment.objects.select_related("comparison__task", "comparison__trajectory_a", "comparison__trajectory_b")
        .filter(pk=assignment_id, annotator=annotator)
        .exclude(status=Assignment.Status.EXPIRED)
        .first()
    )
    if assignment is None:
        raise ArbiterError("That comparison is not assigned to you (or its lease expired).")
    from annotate.services.assignments import store_allowed

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
    lowest role cannot fill either (settings, 5 and 60 by default)."""
    from datetime import timedelta

    from django.conf import settings

    per_side = settings.CORRECTIONS_PER_SIDE
    per_hour = settings.CORRECTIONS_PER_HOUR
    mine = Correction.objects.filter(author=annotator)
    if mine.filter(original=original, comparison_id=comparison_id).count() >= per_side:
        raise ArbiterError(
            f"You have stored {per_side} corrections of this side already; a reviewer reads those first. "
            "Nothing was stored.",
            details=[_problem("side", f"at most {per_side} corrections of one side.")],
        )
    if mine.filter(created_at__gte=timezone.now() - timedelta(hours=1)).count() >= per_hour:
        raise ArbiterError(
            f"You have stored {per_hour} corrections in the last hour, the most an hour allows; try again later. "
            "Nothing was stored.",
            details=[_problem("", f"at most {per_hour} corrections an hour.")],
        )


@transaction.atomic
def correction_review(*, correction: Correction, decision: str, reviewer, note: str = "") -> Correction:
    """Accept or reject a correction (a second review changes the decision, with its reviewer)."""
    statuses = {"accept": Correction.Status.ACCEPTED, "reject": Correction.Status.REJECTED}
    if decision not in statuses:
        raise ArbiterError(
            f"decision: accept or reject; got {str(decision)[:40]!r}.",
            details=[_problem("decision", "accept or reject.")],
        )
    if not isinstance(note, str) or len(note) > MAX_TEXT:
        raise ArbiterError("note: text.", details=[_problem("note", f"text of at most {MAX_TEXT:,} characters.")])
    correction = Correction.objects.select_for_update().get(pk=correction.pk)
    correction.status = statuses[decision]
    correction.reviewed_by, correction.reviewed_at, correction.review_note = reviewer, timezone.now(), note
    correction.save(update_fields=["status", "reviewed_by", "reviewed_at", "review_note", "updated_at"])
    return correction
