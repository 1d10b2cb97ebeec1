"""The comparison screen's context: an assignment shown in screen terms, never naming policies."""

from __future__ import annotations

import json

from django.utils import timezone

from annotate.campaign_access import dimensions_of
from annotate.judgement_input import SCREEN_SCALE
from annotate.judges.votes import judge_vote_after_submit, judge_vote_shown, judge_vote_sure
from annotate.models import Assignment, Campaign, Comparison, Judgement, JudgeMode, Trajectory
from annotate.quality import annotator_counts
from annotate.services.corrections import CORRECTABLE_KINDS, tool_names
from annotate.services.labeling_sql import PREFILL_CONFIDENCE
from annotate.services.revisions import REVISABLE_LAST, judgement_revisions
from annotate.trajectory_view import Align, pair_view, setup_views
from core.ids import parse_index

IDENTICAL = "Identical trajectories"
PROMPT_FOLD = 400  # characters of a task prompt shown before "Show the whole task"
SKIP_REASONS = ["Cannot judge: needs expertise", "Unreadable or broken", IDENTICAL, "Other"]


def screen_sides(assignment: Assignment):
    comparison = assignment.comparison
    a, b = comparison.trajectory_a, comparison.trajectory_b
    return (a, b) if assignment.left_is_a else (b, a)


def _with_comparison(assignment: Assignment) -> Assignment:
    """Load the comparison, its task and both trajectories in one query unless they came along.
    Both trajectories are of the comparison's task (the composite foreign keys hold it): they
    are given that task, so reading a trajectory's task (its environment's tools) costs no query."""
    if not Assignment._meta.get_field("comparison").is_cached(assignment):
        assignment.comparison = Comparison.objects.select_related("task", "trajectory_a", "trajectory_b").get(
            pk=assignment.comparison_id
        )
    comparison = assignment.comparison
    for trajectory in (comparison.trajectory_a, comparison.trajectory_b):
        if not Trajectory._meta.get_field("task").is_cached(trajectory):
            trajectory.task = comparison.task
    return assignment


def _cleaned(form, name: str):
    return getattr(form, "cleaned_data", {}).get(name) if form is not None else None


def _dimensions(campaign: Campaign, form=None, sent=None) -> list[dict]:
    """The rating rows, each with the points chosen in a refused submit (kept, never reset), or
    in `sent` (the verdict form's fields: a judgement being revised)."""
    sent = sent if sent is not None else (form.data if form is not None else {})
    return [
        {
            **d,
            "points": range(1, d["scale"] + 1),
            "left_value": str(sent.get(f"rating__{d['name']}__left", "")),
            "right_value": str(sent.get(f"rating__{d['name']}__right", "")),
        }
        for d in dimensions_of(campaign)
    ]


def _screen_choice(choice: int, left_is_a: bool) -> int:
    return choice if left_is_a else 6 - choice


def _words(choice: int) -> str:
    return next(text for value, text, _ in SCREEN_SCALE if value == choice)


def judge_confidence(probability_a: float | None, left_is_a: bool) -> dict | None:
    """A reward-model judge's confidence in screen terms, P(left is better); None for a judge
    that gives no probability (a chat judge). Whether it is sure enough: `judge_vote_sure`."""
    if probability_a is None:
        return None
    return {"p_left": probability_a if left_is_a else 1.0 - probability_a}


def judge_after_submit(*, judgement, assignment: Assignment) -> dict | None:
    """What the campaign's judge said of the comparison just judged, in that screen's terms
    (judge modes after_submit and prefilled), beside the annotator's own verdict: the same side
    and strength ("as you did"), the same side at another strength, or the other side."""
    vote = judge_vote_after_submit(judgement=judgement)
    if vote is None:
        return None
    theirs = _screen_choice(vote["choice"], assignment.left_is_a)
    yours = _screen_choice(judgement.choice, assignment.left_is_a)
    same_side = (theirs > 3) - (theirs < 3) == (yours > 3) - (yours < 3)
    after = {
        "judge": vote["judge"],
        "text": _words(theirs),
        "yours": _words(yours),
        "agrees": theirs == yours,
        "same_side": same_side,
        "confidence": judge_confidence(vote.get("probability_a"), assignment.left_is_a),
        "rationale": vote["rationale"],
    }
    after["words"] = after_vote_words(after)
    return after


def after_vote_words(vote: dict) -> str:
    """What follows "judge X said <verdict>": its confidence where it has one, then how the
    person's verdict compares ("as you did" only for the same side and the same strength)."""
    confidence = vote.get("confidence")
    sure = f", P(left better) {100 * confidence['p_left']:.0f}%" if confidence else ""
    if vote["agrees"]:
        return f"{sure}, as you did"
    if vote["same_side"]:
        return f"{sure}; you chose the same side at another strength, {vote['yours']}"
    return f"{sure}; you said {vote['yours']}"


def correction_starts(steps) -> dict[str, dict]:
    """Each step a correction may start at, by index: a call ({kind, tool, arguments}, which the
    form prefills) or the answer ({kind}: calls typed there go before it)."""
    starts = {}
    for i, step in enumerate(steps if isinstance(steps, list) else []):
        kind = step.get("kind") if isinstance(step, dict) else None
        if kind not in CORRECTABLE_KINDS:
            continue
        starts[str(i)] = {"kind": kind}
        if kind == "action":
            starts[str(i)].update(tool=step.get("tool", ""), arguments=step.get("arguments", {}))
    return starts


def workbench_context(
    *,
    campaign: Campaign,
    annotator,
    assignment: Assignment | None,
    form=None,
    error: str = "",
    align: Align = "content",
    after_vote: dict | None = None,
) -> dict:
    context = {
        "campaign": campaign,
        "dimensions": _dimensions(campaign, form),
        "assignment": assignment,
        "counts": annotator_counts(campaign=campaign, annotator=annotator),
        "scale": SCREEN_SCALE,
        "prompt_fold": PROMPT_FOLD,
        "skip_reasons": SKIP_REASONS,
        "form": form,
        "error": error,
        "align": align,
        # A refused submit keeps the steps it marked.
        "marked_left": _cleaned(form, "first_wrong_left"),
        "marked_right": _cleaned(form, "first_wrong_right"),
        "after_vote": after_vote,
        "suggestion": None,
        "judge_hint": None,
        # A paused, closed or archived campaign hands out nothing: the page says that, and only that.
        "inactive": campaign.status != Campaign.Status.ACTIVE,
        "revisable_last": REVISABLE_LAST,  # the way back to what was just submitted
    }
    if assignment is not None:
        left, right = screen_sides(_with_comparison(assignment))
        pair = pair_view(left.steps, right.steps, align=align)
        context.update(
            prompt=assignment.comparison.task.prompt,
            pair=pair,
            folds=any(block.folded for block in pair.blocks),
            setups=setup_views(left.metadata, right.metadata),
            left_answer=left.answer,
            right_answer=right.answer,
            # The same steps and answer under two agent names: nothing to prefer.
            identical=bool(left.behaviour_hash) and left.behaviour_hash == right.behaviour_hash,
            identical_reason=IDENTICAL,
            correction_tools=sorted(set(tool_names(left)) | set(tool_names(right))),
            # What the correction form starts from at each step: the original call, or the answer,
            # as JSON in a data- attribute (no data block in a <script>: the page has no inline script).
            correction_steps=json.dumps(
                {"left": correction_starts(left.steps), "right": correction_starts(right.steps)}
            ),
            # Seconds the lease has left, from the server's clock (the page counts down from it).
            lease_left=max(0, int((assignment.leased_until - timezone.now()).total_seconds())),
        )
        if form is None and campaign.judge_mode == JudgeMode.PREFILLED:
            vote = judge_vote_shown(campaign=campaign, comparison_id=assignment.comparison_id)
            if vote is not None:
                confidence = judge_confidence(vote.probability_a, assignment.left_is_a)
                choice = _screen_choice(vote.choice, assignment.left_is_a)
                sure = judge_vote_sure(vote.probability_a)
                context["suggestion"] = choice if sure else None
                context["judge_hint"] = {
                    "text": _words(choice),
                    "confidence": confidence,
                    "prefilled": sure,
                    "threshold": PREFILL_CONFIDENCE,  # the rule: annotate/judges/votes.py
                }
    return context


def judgement_form_fields(judgement: Judgement) -> dict[str, str]:
    """A stored judgement (A/B terms) as the verdict form's fields, in the screen terms of the
    assignment it was made on: what the revise form starts from."""
    left_is_a = judgement.assignment.left_is_a
    letters = {"left": "A", "right": "B"} if left_is_a else {"left": "B", "right": "A"}
    wrong = {"A": judgement.first_wrong_step_a, "B": judgement.first_wrong_step_b}
    fields = {"choice": str(_screen_choice(judgement.choice, left_is_a)), "rationale": judgement.rationale}
    if judgement.both_bad:
        fields["both_bad"] = "on"
    for side, letter in letters.items():
        if wrong[letter] is not None:
            fields[f"first_wrong_{side}"] = str(wrong[letter])
        for dim, sides in (judgement.ratings or {}).items():
            if isinstance(sides, dict) and sides.get(letter) is not None:
                fields[f"rating__{dim}__{side}"] = str(sides[letter])
    return fields


def revise_context(
    *, judgement: Judgement, recent: list[Judgement], sent=None, error: str = "", align: Align = "content"
) -> dict:
    """The revise page: the comparison as it was shown (the same sides), the verdict as stored
    or as just typed (`sent`, a refused revision keeps it), the person's last judgements."""
    assignment = judgement.assignment
    assignment.comparison = judgement.comparison
    left, right = screen_sides(_with_comparison(assignment))
    campaign = judgement.comparison.campaign
    sent = sent if sent is not None else judgement_form_fields(judgement)
    return {
        "judgement": judgement,
        "campaign": campaign,
        "recent": recent,
        "sent": sent,
        "choice": parse_index(sent.get("choice") or ""),
        "marked_left": parse_index(sent.get("first_wrong_left") or ""),
        "marked_right": parse_index(sent.get("first_wrong_right") or ""),
        "dimensions": _dimensions(campaign, sent=sent),
        "scale": SCREEN_SCALE,
        "prompt": judgement.comparison.task.prompt,
        "pair": pair_view(left.steps, right.steps, align=align),
        "error": error,
        "revisable_last": REVISABLE_LAST,
        "history": [
            {
                "at": change.created_at,
                "before": _verdict_words(change.before, assignment.left_is_a),
                "after": _verdict_words(change.after, assignment.left_is_a),
            }
            for change in judgement_revisions(judgement=judgement)
        ],
    }


def _verdict_words(verdict: dict, left_is_a: bool) -> str:
    """A recorded verdict (A/B terms) in the words of its screen: the choice, and both bad."""
    words = _words(_screen_choice(verdict["choice"], left_is_a))
    return f"{words}, both bad" if verdict.get("both_bad") else words
