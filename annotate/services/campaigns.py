"""Campaign writes: settings (validated here, for the pages and the API alike), status,
clone, pool, delete.

Every settings problem is reported at once, each naming its field, in words a person
understands ("gold_rate: a share between 0 and 1 ... got 1.5").
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from annotate.campaign_access import SCALES, dimensions_of
from annotate.models import Campaign, Comparison, Judge, Judgement, JudgeMode, Task
from annotate.services.assignments import leases_end_outside_pool
from core import json_input
from core.ids import id_value
from core.markdown import markdown_html
from core.problems import problem, problem_text
from webapp.errors import ArbiterError
from webapp.roles import Role, user_has_role

MAX_VOTES = 50
MIN_LEASE_SECONDS, MAX_LEASE_SECONDS = 30, 7 * 24 * 3600
MAX_GUIDELINES = 100_000
MAX_DIMENSIONS = 20
SETTINGS = (
    "name",
    "guidelines",
    "votes_per_comparison",
    "lease_seconds",
    "gold_rate",
    "dimensions",
    "rationale_required",
    "deadline",
    "pool_only",
    "pool",
    "environment",
    "task_split",
    "judge_mode",
    "shown_judge",
)

# status -> {action: new status}
TRANSITIONS = {
    Campaign.Status.DRAFT: {"activate": Campaign.Status.ACTIVE, "close": Campaign.Status.CLOSED},
    Campaign.Status.ACTIVE: {"pause": Campaign.Status.PAUSED, "close": Campaign.Status.CLOSED},
    Campaign.Status.PAUSED: {"resume": Campaign.Status.ACTIVE, "close": Campaign.Status.CLOSED},
    Campaign.Status.CLOSED: {"reopen": Campaign.Status.ACTIVE, "archive": Campaign.Status.ARCHIVED},
    Campaign.Status.ARCHIVED: {"unarchive": Campaign.Status.CLOSED},
}
ACTIONS = ("activate", "pause", "resume", "close", "reopen", "archive", "unarchive")


def _text(value, *, field: str, limit: int, problems: list, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        problems.append(problem("must be text.", field=field))
        return ""
    value = value.strip()
    if required and not value:
        problems.append(problem("is required.", field=field))
    elif len(value) > limit:
        problems.append(problem(f"has at most {limit:,} characters; got {len(value):,}.", field=field))
    else:
        try:
            json_input.check(value)
        except json_input.JsonInputError as exc:
            problems.append(problem(f"cannot be stored: {exc}.", field=field))
    return value


def _whole(value, *, field: str, low: int, high: int, problems: list, what: str) -> int | None:
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and len(value) < 40:
        try:
            number = int(value.strip())
        except ValueError:
            pass
    if number is None:
        problems.append(problem(f"must be a whole number ({what}); got {str(value)[:40]!r}.", field=field))
        return None
    if not low <= number <= high:
        problems.append(problem(f"must be between {low:,} and {high:,} ({what}); got {number:,}.", field=field))
        return None
    return number


def _flag(value, *, field: str, problems: list) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "on", "1", 1):
        return True
    if value in ("false", "off", "0", 0, "", None):
        return False
    problems.append(problem("must be true or false.", field=field))
    return False


def dimensions_clean(raw, problems: list | None = None) -> list[dict]:
    """Rating dimensions as [{name, scale, description, required}]; a plain name means an optional
    1-5 scale. A required dimension must be rated on both sides before a judgement is stored.

    A problem names the dimension by its position (and name, when it has one).
    """
    own = problems is None
    problems = [] if own else problems
    if raw in (None, ""):
        raw = []
    if not isinstance(raw, list):
        problems.append(problem("must be a list of {name, scale, description}.", field="dimensions"))
        raw = []
    if len(raw) > MAX_DIMENSIONS:
        problems.append(problem(f"at most {MAX_DIMENSIONS} dimensions; got {len(raw)}.", field="dimensions"))
        raw = raw[:MAX_DIMENSIONS]
    cleaned, seen = [], set()
    for i, item in enumerate(raw, start=1):
        where = f"dimensions[{i}]"
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict):
            problems.append(
                problem(f"dimension {i} must be a name or {{name, scale, description, required}}.", field=where)
            )
            continue
        unknown = sorted(set(item) - {"name", "scale", "description", "required"})
        if unknown:
            problems.append(problem(f"dimension {i} has unknown keys: {', '.join(map(str, unknown))}.", field=where))
        before = len(problems)
        name = _text(item.get("name"), field=f"{where}.name", limit=60, problems=problems)
        if len(problems) == before and not name:
            problems.append(problem(f"dimension {i} has no name; give it one or remove it.", field=f"{where}.name"))
        elif name and not all(ch.isalnum() or ch in " _-" for ch in name):
            problems.append(
                problem(
                    f"dimension {i} ({name!r}): a name uses letters, digits, spaces, '-' and '_' only.",
                    field=f"{where}.name",
                )
            )
        elif name.lower() in seen:
            problems.append(problem(f"dimension {i}: {name!r} is named twice.", field=f"{where}.name"))
        seen.add(name.lower())
        label = f"dimension {i}" + (f" ({name})" if name else "")
        scale = _whole(
            item.get("scale", 5),
            field=f"{where}.scale",
            low=SCALES.start,
            high=SCALES.stop - 1,
            problems=problems,
            what=f"{label}: the number of points of its scale",
        )
        description = _text(item.get("description"), field=f"{where}.description", limit=500, problems=problems)
        required = _flag(item.get("required", False), field=f"{where}.required", problems=problems)
        cleaned.append({"name": name, "scale": scale or 5, "description": description, "required": required})
    if own and problems:
        raise ArbiterError(
            "The dimensions are not valid: " + "; ".join(p["message"] for p in problems), details=problems
        )
    return cleaned


def _deadline(value, problems: list, *, was: datetime | None) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and len(value) <= 40:
        try:
            moment = parse_datetime(value.strip())
        except ValueError:
            moment = None
        if moment is None:
            problems.append(
                problem(f"must be a date and time like 2026-12-31T18:00; got {value[:40]!r}.", field="deadline")
            )
            return None
    else:
        problems.append(problem("must be a date and time like 2026-12-31T18:00.", field="deadline"))
        return None
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    if moment < timezone.now() and moment != was:
        problems.append(problem("is in the past.", field="deadline"))
        return None
    return moment


def _pool(value, problems: list) -> list:
    """Users by username or id; each must exist, be active and be able to label."""
    if value in (None, ""):
        return []
    if not isinstance(value, list) or len(value) > 10_000:
        problems.append(problem("must be a list of usernames or user ids.", field="pool"))
        return []
    User = get_user_model()
    names = [v for v in value if isinstance(v, str) and 0 < len(v) <= 150 and "\x00" not in v]
    ids = [v for v in value if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2**63]
    bad = [v for v in value if v not in names and v not in ids]
    if bad:
        problems.append(problem(f"{str(bad[0])[:40]} is neither a username nor a user id.", field="pool"))
    found = list(User.objects.filter(Q(username__in=names) | Q(pk__in=ids)).prefetch_related("groups"))
    known = {u.username for u in found} | {u.pk for u in found}
    missing = [str(v) for v in names + ids if v not in known]
    if missing:
        problems.append(problem(f"no such user: {', '.join(missing[:5])}.", field="pool"))
    cannot = [u.username for u in found if not u.is_active or not user_has_role(u, Role.ANNOTATOR, Role.ADMIN)]
    if cannot:
        problems.append(
            problem(f"{', '.join(cannot[:5])} cannot label (inactive, or without the annotator role).", field="pool")
        )
    return found


GUIDELINES_RENDER_SECONDS = 2.0  # guidelines are rendered once, when saved; Markdown that takes longer is refused


def _rendered(text: str | None) -> tuple[str, float]:
    """The guidelines as sanitized HTML, and the seconds that took."""
    import time

    started = time.perf_counter()
    html = markdown_html(text) if text else ""
    return html, time.perf_counter() - started


def campaign_settings_clean(data: dict, *, campaign: Campaign | None = None) -> dict:
    """Check the settings given in `data` (all of them on create, any of them on edit)."""
    if not isinstance(data, dict):
        raise ArbiterError("Send the campaign's settings as an object.")
    unknown = sorted(set(data) - set(SETTINGS) - {"status"})
    problems: list[dict] = [problem("is not a campaign setting.", field=str(k)[:60]) for k in unknown]
    out: dict = {}
    if campaign is None or "name" in data:
        before = len(problems)
        name = _text(data.get("name"), field="name", limit=200, problems=problems, required=True)
        if (
            len(problems) == before
            and Campaign.objects.filter(name=name).exclude(pk=getattr(campaign, "pk", None)).exists()
        ):
            problems.append(problem(f"a campaign called {name!r} exists already.", field="name"))
        out["name"] = name
    if "guidelines" in data:
        out["guidelines"] = _text(data["guidelines"], field="guidelines", limit=MAX_GUIDELINES, problems=problems)
        out["guidelines_html"], slow = _rendered(out["guidelines"])
        if slow > GUIDELINES_RENDER_SECONDS:
            problems.append(
                problem(
                    f"take {slow:.1f} s to render (the limit is "
                    f"{GUIDELINES_RENDER_SECONDS:g} s): split very long runs of brackets or markup.",
                    field="guidelines",
                )
            )
    if "votes_per_comparison" in data:
        out["votes_per_comparison"] = _whole(
            data["votes_per_comparison"],
            field="votes_per_comparison",
            low=1,
            high=MAX_VOTES,
            problems=problems,
            what="judgements each comparison gets from different annotators",
        )
    if "lease_seconds" in data:
        out["lease_seconds"] = _whole(
            data["lease_seconds"],
            field="lease_seconds",
            low=MIN_LEASE_SECONDS,
            high=MAX_LEASE_SECONDS,
            problems=problems,
            what="seconds an annotator holds a comparison",
        )
    if "gold_rate" in data and (rate := _gold_rate(data["gold_rate"], problems)) is not None:
        out["gold_rate"] = rate
    if "dimensions" in data:
        out["dimensions"] = dimensions_clean(data["dimensions"], problems)
    if "rationale_required" in data:
        out["rationale_required"] = _flag(data["rationale_required"], field="rationale_required", problems=problems)
    if "pool_only" in data:
        out["pool_only"] = _flag(data["pool_only"], field="pool_only", problems=problems)
    if "deadline" in data:
        out["deadline"] = _deadline(data["deadline"], problems, was=getattr(campaign, "deadline", None))
    if "pool" in data:
        out["pool"] = _pool(data["pool"], problems)
    if "environment" in data:
        out["environment"] = _text(data["environment"], field="environment", limit=100, problems=problems)
    if "task_split" in data and (split := _task_split(data["task_split"], problems)) is not None:
        out["task_split"] = split
    if "judge_mode" in data or "shown_judge" in data:
        out.update(_judge_shown(data, campaign, problems))
    if "status" in data and campaign is None:
        if data["status"] not in (Campaign.Status.DRAFT, Campaign.Status.ACTIVE):
            problems.append(problem("a new campaign starts as draft or active.", field="status"))
        else:
            out["status"] = data["status"]
    if campaign is not None and out.get("votes_per_comparison") is not None:
        _check_votes(campaign, out["votes_per_comparison"], problems)
    if problems:
        raise ArbiterError(
            "The campaign was not saved: "
            + "; ".join(problem_text(p) for p in problems[:5])
            + (" ..." if len(problems) > 5 else ""),
            details=problems,
        )
    return out


def _gold_rate(rate, problems: list) -> float | None:
    """The share of assignments that are gold checks, 0..1; None (and a problem) otherwise."""
    try:
        value = float(rate) if not isinstance(rate, bool) and isinstance(rate, (int, float, str)) else None
    except (ValueError, OverflowError):
        value = None
    if value is None or value != value or not 0 <= value <= 1:
        message = f"must be a share between 0 and 1 (0.1: one assignment in ten is a gold check); got {str(rate)[:40]}."
        problems.append(problem(message, field="gold_rate"))
        return None
    return value


def _task_split(value, problems: list) -> str | None:
    """A task split, or "" for any; None (and a problem) otherwise."""
    split = value or ""
    if split not in ("", *Task.Split.values):
        problems.append(
            problem(
                f"must be one of {', '.join(Task.Split.values)} (or empty for any); got {str(split)[:40]!r}.",
                field="task_split",
            )
        )
        return None
    return split


def _judge_shown(data: dict, campaign: Campaign | None, problems: list) -> dict:
    """The judge mode and the judge it shows: a mode other than blind needs a judge."""
    out = {}
    mode = data.get("judge_mode", getattr(campaign, "judge_mode", JudgeMode.BLIND))
    if mode not in JudgeMode.values:
        problems.append(problem(f"one of {', '.join(JudgeMode.values)}; got {str(mode)[:40]!r}.", field="judge_mode"))
        return out
    out["judge_mode"] = mode
    judge = getattr(campaign, "shown_judge", None)
    if "shown_judge" in data:
        value = data["shown_judge"]
        if value in (None, ""):
            judge = None
        elif (judge_id := id_value(value)) is None:
            problems.append(problem(f"a judge id or null; got {str(value)[:40]!r}.", field="shown_judge"))
            return out
        else:
            judge = Judge.objects.filter(pk=judge_id).first()
            if judge is None:
                problems.append(problem(f"no judge with id {str(value)[:20]}.", field="shown_judge"))
                return out
            if judge.kind == Judge.Kind.RUBRIC:
                problems.append(
                    problem(
                        f"{judge.name} is a rubric judge: it knows the answer, which annotators never "
                        "see; show a reward-model or chat judge.",
                        field="shown_judge",
                    )
                )
                return out
        out["shown_judge"] = judge
    if mode != JudgeMode.BLIND and judge is None:
        problems.append(problem(f"judge mode {mode} shows a judge's vote: choose the judge.", field="shown_judge"))
    return out


def _check_votes(campaign: Campaign, k: int, problems: list) -> None:
    """k may not go below the votes a comparison already has."""
    most = (Comparison.objects.filter(campaign=campaign, is_gold=False).aggregate(m=Max("votes"))["m"]) or 0
    if k < most:
        problems.append(
            problem(
                f"cannot go below {most}: a comparison already has {most} votes (asked for {k}).",
                field="votes_per_comparison",
            )
        )


def _apply(campaign: Campaign, values: dict) -> None:
    pool = values.pop("pool", None)
    if values.get("guidelines") is not None:  # rendered when checked: saving does not render them again
        campaign.set_guidelines(values.pop("guidelines"), values.pop("guidelines_html"))
    values.pop("guidelines_html", None)
    if "shown_judge" in values:  # may be None: no judge shown
        campaign.shown_judge = values.pop("shown_judge")
    for key, value in values.items():
        if value is not None:
            setattr(campaign, key, value)
    campaign.save()
    if pool is not None:
        campaign.pool.set(pool)


@transaction.atomic
def campaign_create(*, data: dict, created_by) -> Campaign:
    values = campaign_settings_clean(data)
    campaign = Campaign(created_by=created_by)
    _apply(campaign, values)
    return campaign


@transaction.atomic
def campaign_update(*, campaign: Campaign, data: dict) -> Campaign:
    """Change some settings. A new k reopens or completes comparisons to match it."""
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if isinstance(data, dict) and "status" in data:
        raise ArbiterError(
            "Change the status with an action (pause, resume, close, archive, ...).",
            details=[problem("use the campaign's status actions.", field="status")],
        )
    values = campaign_settings_clean(data, campaign=campaign)
    old_k = campaign.votes_per_comparison
    pool_changed = bool({"pool", "pool_only"} & set(values))
    _apply(campaign, values)
    if pool_changed:
        leases_end_outside_pool(campaign=campaign)
    k = campaign.votes_per_comparison
    if k != old_k:
        ordinary = Comparison.objects.filter(campaign=campaign, is_gold=False)
        ordinary.filter(status=Comparison.Status.COMPLETE, votes__lt=k).update(status=Comparison.Status.OPEN)
        ordinary.filter(status=Comparison.Status.OPEN, votes__gte=k).update(status=Comparison.Status.COMPLETE)
    return campaign


@transaction.atomic
def campaign_act(*, campaign: Campaign, action: str) -> Campaign:
    """Pause, resume, close, ... a campaign. Leases already given stay valid: a paused or
    closed campaign hands out no new work, but a judgement on a live lease is still stored."""
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if action not in ACTIONS:
        raise ArbiterError(f"Unknown action {str(action)[:40]!r}; one of {', '.join(ACTIONS)}.")
    allowed = TRANSITIONS[campaign.status]
    if action not in allowed:
        article = "An" if campaign.status[0] in "aeiou" else "A"
        raise ArbiterError(
            f"{article} {campaign.status} campaign cannot {action}; it can {' or '.join(allowed) or 'do nothing'}."
        )
    campaign.status = allowed[action]
    campaign.save(update_fields=["status", "updated_at"])
    return campaign


@transaction.atomic
def campaign_clone(*, campaign: Campaign, name: str, created_by) -> Campaign:
    """A new campaign with the same settings, guidelines and pool; no comparisons or judgements."""
    values = campaign_settings_clean({"name": name})
    copy = Campaign.objects.create(
        name=values["name"],
        guidelines=campaign.guidelines,
        votes_per_comparison=campaign.votes_per_comparison,
        lease_seconds=campaign.lease_seconds,
        gold_rate=campaign.gold_rate,
        dimensions=dimensions_of(campaign),
        rationale_required=campaign.rationale_required,
        judge_mode=campaign.judge_mode,
        shown_judge=campaign.shown_judge,
        pool_only=campaign.pool_only,
        environment=campaign.environment,
        task_split=campaign.task_split,
        cloned_from=campaign,
        created_by=created_by,
    )
    copy.pool.set(campaign.pool.all())
    return copy


@transaction.atomic
def campaign_delete(*, campaign: Campaign) -> None:
    """Delete a campaign that has no judgements (one with judgements is archived instead)."""
    if Judgement.objects.filter(comparison__campaign=campaign).exists():
        raise ArbiterError(f"{campaign.name} has judgements: it cannot be deleted. Close and archive it instead.")
    if campaign.snapshots.exists():
        raise ArbiterError(f"{campaign.name} is in a dataset snapshot: it cannot be deleted. Archive it instead.")
    campaign.delete()


@transaction.atomic
def campaign_get_or_create(*, name: str, created_by=None) -> tuple[Campaign, bool]:
    """The campaign called `name`, created with default settings if it does not exist."""
    name = name.strip()
    if not name:
        raise ArbiterError("A campaign needs a name.")
    if len(name) > 200:
        raise ArbiterError("A campaign name has at most 200 characters.")
    try:
        json_input.check(name)
    except json_input.JsonInputError as exc:
        raise ArbiterError(f"The campaign name cannot be stored: {exc}.") from None
    return Campaign.objects.get_or_create(name=name, defaults={"created_by": created_by})
