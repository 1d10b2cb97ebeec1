"""Filling a campaign with comparisons built from stored trajectories.

A fill names the trajectories (`selection`: import batches, policies, rollout runs, a task
split, tags; always within the campaign's environment and split when it has them) and how
they are paired (`strategy`: a pairing of annotate/services/comparisons.py, or
`rm_uncertainty`: every pair up to the cap, then a reward-model scoring run puts the
pairs the model finds closest first in the queue). `fill_preview` counts what a fill
would make without writing. A fill over many trajectories runs as a job (a worker
builds it, with progress); a small one runs in the request. Either way it is idempotent:
pairs already in the campaign are not made again.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

from django.conf import settings
from django.db.models import QuerySet

from annotate.models import Campaign, CampaignFill, ImportBatch, Policy, Task, Trajectory
from annotate.services.comparisons import STRATEGIES, PairPlan, comparisons_insert, comparisons_pairs
from core import json_input
from core.problems import problem
from rewardmodel.models import RewardModel
from webapp.errors import ArbiterError
from webapp.jobs import Heartbeat, job_claim, job_dispatch, job_finish
from webapp.models import Run
from webapp.runs.services import run_launch

log = logging.getLogger(__name__)

FILL_STRATEGIES = (*STRATEGIES, "rm_uncertainty")
MAX_PER_TASK = 1000
MAX_IDS = 1000
FILL_STALE_REASON = "The worker stopped before the fill finished; comparisons built so far stay. Fill again."


@dataclass
class FillRequest:
    strategy: str = "all_pairs"
    max_per_task: int = 10
    import_batches: list[int] = field(default_factory=list)
    policies: list[int] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    split: str = ""
    tags: list[str] = field(default_factory=list)
    policy_a: int | None = None
    policy_b: int | None = None
    reward_model: int | None = None
    seed: int = 0
    all_trajectories: bool = False  # no source picked: every stored trajectory, other campaigns' too

    def selection(self) -> dict:
        return {
            k: v
            for k, v in asdict(self).items()
            if k in ("import_batches", "policies", "runs", "split", "tags", "all_trajectories") and v
        }

    def sources(self) -> list[str]:
        """Where the trajectories come from, in words ("" when every stored one)."""
        named = [("import", self.import_batches), ("policy", self.policies), ("run", self.runs), ("tag", self.tags)]
        return [
            f"{noun}{'s' if len(values) > 1 else ''} {', '.join(map(str, values[:5]))}"
            for noun, values in named
            if values
        ]

    def options(self) -> dict:
        return {
            k: v
            for k, v in asdict(self).items()
            if k in ("max_per_task", "policy_a", "policy_b", "reward_model", "seed") and v is not None
        }


def _ids(value, name: str, model, problems: list) -> list[int]:
    if value in (None, "", []):
        return []
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or len(value) > MAX_IDS:
        problems.append(problem(f"must be a list of ids (at most {MAX_IDS}).", field=name))
        return []
    ids = []
    for item in value:
        try:
            number = int(item) if not isinstance(item, bool) and isinstance(item, (int, str)) else None
        except ValueError:
            number = None
        if number is None or not 0 < number < 2**63:
            problems.append(problem(f"{str(item)[:40]!r} is not an id.", field=name))
            return []
        ids.append(number)
    found = set(model.objects.filter(pk__in=ids).values_list("pk", flat=True))
    missing = [str(i) for i in ids if i not in found]
    if missing:
        problems.append(problem(f"no {model._meta.verbose_name} with id {', '.join(missing[:5])}.", field=name))
    return sorted(set(ids))


def _storable(value) -> bool:
    try:
        json_input.check(value)
    except json_input.JsonInputError:
        return False
    return True


def fill_request_clean(data: dict) -> FillRequest:
    """A fill request from the API's or the form's input; every problem named at once."""
    if not isinstance(data, dict):
        raise ArbiterError("Send the fill as an object.")
    known = {
        "strategy",
        "max_per_task",
        "import_batches",
        "policies",
        "runs",
        "split",
        "tags",
        "policy_a",
        "policy_b",
        "reward_model",
        "seed",
        "all_trajectories",
    }
    problems = [problem("is not a fill option.", field=str(k)[:60]) for k in sorted(set(data) - known, key=str)]
    strategy = data.get("strategy") or "all_pairs"
    if strategy not in FILL_STRATEGIES:
        problems.append(problem(f"one of {', '.join(FILL_STRATEGIES)}; got {str(strategy)[:40]!r}.", field="strategy"))
    request = FillRequest(strategy=strategy if strategy in FILL_STRATEGIES else "all_pairs")
    for name, low, high in (("max_per_task", 1, MAX_PER_TASK), ("seed", 0, 2**31 - 1)):
        if data.get(name) in (None, ""):
            continue
        value = data[name]
        try:
            number = int(value) if not isinstance(value, bool) and isinstance(value, (int, str)) else None
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            problems.append(problem(f"a whole number from {low} to {high:,}; got {str(value)[:40]!r}.", field=name))
        else:
            setattr(request, name, number)
    request.import_batches = _ids(data.get("import_batches"), "import_batches", ImportBatch, problems)
    request.policies = _ids(data.get("policies"), "policies", Policy, problems)
    request.runs = _ids(data.get("runs"), "runs", Run, problems)
    for name, model in (("policy_a", Policy), ("policy_b", Policy)):
        found = _ids(data.get(name), name, model, problems)
        setattr(request, name, found[0] if found else None)
    split = data.get("split") or ""
    if split not in ("", *Task.Split.values):
        problems.append(
            problem(f"one of {', '.join(Task.Split.values)} or empty; got {str(split)[:40]!r}.", field="split")
        )
    else:
        request.split = split
    tags = data.get("tags") or []
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    if not isinstance(tags, list) or not all(isinstance(t, str) and 0 < len(t) <= 100 for t in tags) or len(tags) > 50:
        problems.append(problem("a list of up to 50 tags, each 1-100 characters.", field="tags"))
    elif not _storable(tags):
        problems.append(
            problem("a tag holds a character that cannot be stored (NUL or a lone surrogate).", field="tags")
        )
    else:
        request.tags = tags
    everything = data.get("all_trajectories", False)
    if everything not in (True, False, "on", "true", "false", "", None):
        problems.append(problem("true or false.", field="all_trajectories"))
    request.all_trajectories = everything in (True, "on", "true")
    if not request.sources() and not request.all_trajectories and request.strategy != "policy_vs_policy":
        problems.append(
            problem(
                "pick where the trajectories come from (import batches, "
                "policies, runs or tags), or ask for all_trajectories: "
                "every stored trajectory, other campaigns' included.",
                field="selection",
            )
        )
    if request.strategy == "policy_vs_policy":
        if not request.policy_a or not request.policy_b:
            problems.append(problem("policy_vs_policy needs policy_a and policy_b.", field="policy_a"))
        elif request.policy_a == request.policy_b:
            problems.append(problem("policy_vs_policy needs two different policies.", field="policy_b"))
    if request.strategy == "rm_uncertainty":
        found = _ids(data.get("reward_model"), "reward_model", RewardModel, problems)
        if not found and not any(p.get("field") == "reward_model" for p in problems):
            problems.append(
                problem("rm_uncertainty needs the reward model that orders the queue.", field="reward_model")
            )
        request.reward_model = found[0] if found else None
    if problems:
        raise ArbiterError(
            "The fill is not valid: " + "; ".join(f"{p['field']}: {p['message']}" for p in problems[:5]),
            details=problems,
        )
    return request


def _selected(campaign: Campaign, request: FillRequest) -> QuerySet[Trajectory]:
    rows = Trajectory.objects.all()
    if request.import_batches:
        rows = rows.filter(import_batch_id__in=request.import_batches)
    if request.policies:
        rows = rows.filter(policy_id__in=request.policies)
    if request.runs:
        rows = rows.filter(run_id__in=request.runs)
    if request.split:
        rows = rows.filter(task__split=request.split)
    if campaign.task_split:
        rows = rows.filter(task__split=campaign.task_split)
    if campaign.environment:
        rows = rows.filter(task__environment=campaign.environment)
    return rows


def _pairs(campaign: Campaign, request: FillRequest, plan: PairPlan):
    pairing = "all_pairs" if request.strategy == "rm_uncertainty" else request.strategy
    return comparisons_pairs(
        campaign=campaign,
        plan=plan,
        trajectories=_selected(campaign, request),
        strategy=pairing,
        max_per_task=request.max_per_task,
        policy_a=request.policy_a,
        policy_b=request.policy_b,
        tags=request.tags,
        seed=request.seed,
    )


def fill_preview(*, campaign: Campaign, request: FillRequest) -> dict:
    """What filling would make, without writing: counts, and whether it would run as a job."""
    plan = PairPlan()
    for _ in _pairs(campaign, request, plan):
        pass
    out = plan.as_dict()
    out["runs_as_job"] = plan.trajectories > settings.FILL_INLINE_MAX_TRAJECTORIES
    out["then_scoring_run"] = request.strategy == "rm_uncertainty"
    return out


def campaign_fill_create(*, campaign: Campaign, request: FillRequest, created_by) -> CampaignFill:
    """Record a fill and run it now (small) or queue it for a worker (large)."""
    if campaign.status == Campaign.Status.ARCHIVED:
        raise ArbiterError(f"{campaign.name} is archived; unarchive it before filling it.")
    fill = CampaignFill.objects.create(
        campaign=campaign,
        selection=request.selection(),
        strategy=request.strategy,
        options=request.options(),
        created_by=created_by,
    )
    return job_dispatch(
        fill,
        inline=_selected(campaign, request).count() <= settings.FILL_INLINE_MAX_TRAJECTORIES,
        run=lambda pk: campaign_fill_run(fill_id=pk),
        task="annotate.campaign_fill",
    )


def _request_of(fill: CampaignFill) -> FillRequest:
    return FillRequest(strategy=fill.strategy, **fill.selection, **fill.options)


def campaign_fill_run(*, fill_id: int) -> None:
    """Run a recorded fill (a job: webapp/jobs.py): claimed once, written in chunks."""
    if not job_claim(CampaignFill, fill_id):
        return
    fill = CampaignFill.objects.select_related("campaign", "created_by").get(pk=fill_id)
    request = _request_of(fill)

    total = max(1, _selected(fill.campaign, request).count())
    plan = PairPlan()

    def progress() -> None:  # after each chunk written: the share of the selected trajectories read
        CampaignFill.objects.filter(pk=fill_id).update(
            progress=round(min(0.99, plan.trajectories / total), 3), trajectories=plan.trajectories
        )

    try:
        with Heartbeat(CampaignFill, fill_id):
            created = comparisons_insert(
                campaign=fill.campaign, pairs=_pairs(fill.campaign, request, plan), progress=progress
            )
            if plan.trajectories == 0:
                message = f"Nothing was built: no stored trajectory matches {_described(fill.campaign, request)}."
            else:
                message = (
                    f"Built {created} comparisons from {plan.trajectories} trajectories on {plan.tasks} tasks "
                    f"({plan.existing} pairs were already in the campaign, {plan.identical} identical pairs "
                    f"refused, {plan.capped} left out by the cap of {request.max_per_task} per task)."
                )
            if request.strategy == "rm_uncertainty":
                message += " " + _order_by_reward_model(fill, request)
    except ArbiterError as exc:
        _finish(fill_id, status=CampaignFill.Status.FAILED, message=exc.message)
        return
    except Exception as exc:
        log.exception("fill %s failed", fill_id)
        _finish(fill_id, status=CampaignFill.Status.FAILED, message=f"The fill failed: {type(exc).__name__}: {exc}")
        raise
    _finish(
        fill_id,
        status=CampaignFill.Status.SUCCEEDED,
        message=message,
        trajectories=plan.trajectories,
        created_count=created,
        existing_count=plan.existing,
        identical_count=plan.identical,
    )


def _described(campaign: Campaign, request: FillRequest) -> str:
    """The selection in words, with the campaign's own limits."""
    parts = request.sources() or ["every stored trajectory"]
    if request.split:
        parts.append(f"split {request.split}")
    if campaign.environment or campaign.task_split:
        parts.append(
            "the campaign's "
            + " and ".join(
                f"{what} {value}"
                for what, value in (("environment", campaign.environment), ("split", campaign.task_split))
                if value
            )
        )
    return "; ".join(parts)


def _order_by_reward_model(fill: CampaignFill, request: FillRequest) -> str:
    """Queue a scoring run that puts the pairs the reward model finds closest first."""
    run = run_launch(
        kind="reward_scoring",
        user=fill.created_by,
        name=f"Order {fill.campaign.name} by uncertainty",
        config={"campaign_id": fill.campaign_id, "reward_model_id": request.reward_model, "order": "closest"},
    )
    return f"Scoring run #{run.pk} orders the queue by the reward model's uncertainty."


def _finish(fill_id: int, *, status: str, message: str, **counts) -> None:
    job_finish(
        CampaignFill,
        fill_id,
        status=status,
        message=message,
        error=message if status == CampaignFill.Status.FAILED else "",
        progress=1.0 if status == CampaignFill.Status.SUCCEEDED else 0.0,
        **counts,
    )
