"""Judges in the app: their settings (one check for the pages and the API), their key, and a
judge run over a campaign (the `judge` run kind executes `judge_run_execute`).

A run asks the judge about every comparison of the campaign it has not answered yet (so a
resumed or repeated run fills in only what is missing), plus probes on a seeded share of
them: the sides swapped (position bias) and the same question again (self-consistency).
Each answer is stored as soon as it comes (annotate/judges/votes.py), each chat request
as an audit record, so a cancel, a crash or the cost cap loses nothing already paid for.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass, fields

from django.conf import settings as django_settings
from django.db import transaction
from django.db.models import Sum

from annotate.campaign_access import dimensions_of
from annotate.judgement_input import JudgementInputError, judgement_parse, verdict_in_ab_terms
from annotate.judges.votes import VoteIn, campaign_order, judge_votes_store
from annotate.models import Campaign, Comparison, Judge, JudgeCall, JudgeVote
from core.problems import problem
from rewardmodel.models import RewardModel
from rewardmodel.scoring import RewardScorer
from training.judges.addresses import AddressRefused, endpoint, vetted_addresses
from training.judges.chat import ChatAnswer, ChatJudgeClient, ChatJudgeSettings
from training.judges.prompt import answer_body, judge_messages, verdict_schema
from training.judges.verdicts import reward_model_vote, rubric_vote
from webapp.errors import ArbiterError
from webapp.stored_secrets import secret_open, secret_seal

log = logging.getLogger(__name__)

KINDS = tuple(Judge.Kind.values)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,100}")
# What a chat judge's config may hold: ChatJudgeSettings' fields but the key, plus where the key is.
CHAT_FIELDS = tuple(f.name for f in fields(ChatJudgeSettings) if f.name != "api_key")
MAX_KEY = 4096
# The worker's environment holds the deployment's own secrets (DATABASE_URL, SECRET_KEY, ...): a
# judge may send only a variable named for judges, or one the deployment lists, as its key.
KEY_ENV_PREFIX = "ARBITER_JUDGE_"


DEPLOYMENT_SECRETS = frozenset(
    ("DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "SECRET_KEY_FALLBACKS", "ARBITER_SERVE_API_KEY")
)


def key_env_allowed(name: str) -> bool:
    """Whether a judge may send this variable of the worker as its key: never a deployment secret."""
    if name in DEPLOYMENT_SECRETS:
        return False
    return name.startswith(KEY_ENV_PREFIX) or name in django_settings.JUDGE_KEY_ENV_ALLOWED


# --- Settings -------------------------------------------------------------------------------


def _reward_model_config(config: dict, problems: list) -> dict:

    unknown = sorted(set(config) - {"reward_model_id"})
    problems += [problem("is not a reward-model judge setting.", field=f"config.{str(k)[:60]}") for k in unknown]
    value = config.get("reward_model_id")
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(problem("the id of a registered reward model.", field="config.reward_model_id"))
        return {}
    if not RewardModel.objects.filter(pk=value).exists():
        problems.append(problem(f"no reward model with id {value}.", field="config.reward_model_id"))
    return {"reward_model_id": value}


def _chat_config(config: dict, problems: list) -> dict:
    unknown = sorted(set(config) - set(CHAT_FIELDS) - {"api_key_env"})
    problems += [problem("is not a chat judge setting.", field=f"config.{str(k)[:60]}") for k in unknown]
    if "api_key" in config:
        problems.append(problem("send the key as api_key beside config, never inside it.", field="config.api_key"))
    values = {k: config[k] for k in CHAT_FIELDS if k in config}
    env_name = config.get("api_key_env", "")
    if env_name not in ("", None) and (not isinstance(env_name, str) or not ENV_NAME.fullmatch(env_name)):
        problems.append(
            problem("the name of an environment variable (letters, digits, _).", field="config.api_key_env")
        )
        env_name = ""
    elif env_name and not key_env_allowed(env_name):
        problems.append(
            problem(
                f"a judge reads its key only from a variable named {KEY_ENV_PREFIX}... (or one the deployment lists "
                f"in JUDGE_KEY_ENV_ALLOWED); {env_name[:60]} is not one, and the worker's own settings never go out.",
                field="config.api_key_env",
            )
        )
        env_name = ""
    for name in ("base_url", "model"):
        if name not in values:
            problems.append(problem("required for a chat judge.", field=f"config.{name}"))
    try:
        settings = ChatJudgeSettings(**values)
    except TypeError as exc:  # a value of a type the dataclass cannot hold at all
        problems.append(problem(str(exc), field="config"))
        return {}
    for said in settings.problems():  # "field: what it must be"
        name, _, message = said.partition(":")
        problems.append(problem(message.strip() or said, field=f"config.{name}"))
    if not settings.problems():
        problems += _address_problems(settings.base_url)
    return {**values, "api_key_env": env_name or ""}


def _address_problems(base_url: str) -> list[dict]:
    """The endpoint's host checked where it resolves now (again at every connection: a name that
    does not resolve here may on the worker)."""
    _, host, port = endpoint(base_url)
    try:
        vetted_addresses(host, port, allow_private=django_settings.JUDGE_ALLOW_PRIVATE_ADDRESSES)
    except AddressRefused as exc:
        return [problem(f"{exc}.", field="config.base_url")]
    except OSError:
        pass
    return []


def _kind_config(kind: str, config: dict, problems: list) -> dict:
    if kind == Judge.Kind.REWARD_MODEL:
        return _reward_model_config(config, problems)
    if kind == Judge.Kind.CHAT:
        return _chat_config(config, problems)
    problems += [problem("a rubric judge has no settings.", field=f"config.{str(k)[:60]}") for k in config]
    return {}


def judge_clean(data, *, judge: Judge | None = None) -> dict:
    """Check a judge's fields (all on create, any on edit); every problem named by its field.

    Fields: name, kind (create only), description, config (what the kind needs) and
    api_key (chat only; write-only: stored encrypted, "" removes it).
    """
    if not isinstance(data, dict):
        raise ArbiterError("Send the judge as a JSON object of fields (name, kind, config, ...).")
    problems: list[dict] = []
    allowed = {"name", "kind", "description", "config", "api_key"}
    problems += [problem("is not a judge field.", field=str(k)[:60]) for k in sorted(set(data) - allowed, key=str)]
    out: dict = {}
    kind = judge.kind if judge else data.get("kind")
    if judge is None and kind not in KINDS:
        problems.append(problem(f"one of {', '.join(KINDS)}; got {str(kind)[:40]!r}.", field="kind"))
    if judge is not None and "kind" in data and data["kind"] != judge.kind:
        problems.append(problem("a judge's kind does not change; create another judge.", field="kind"))
    if judge is None or "name" in data:
        name = data.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            problems.append(problem("a name of 1-200 characters.", field="name"))
        elif Judge.objects.filter(name=name.strip()).exclude(pk=getattr(judge, "pk", None)).exists():
            problems.append(problem(f"a judge called {name.strip()!r} exists already.", field="name"))
        else:
            out["name"] = name.strip()
    if "description" in data:
        if not isinstance(data["description"], str) or len(data["description"]) > 5000:
            problems.append(problem("text of at most 5,000 characters.", field="description"))
        else:
            out["description"] = data["description"]
    if judge is None or "config" in data:
        config = data.get("config", {})
        if not isinstance(config, dict):
            problems.append(problem(f"an object of settings, not {type(config).__name__}.", field="config"))
        elif kind in KINDS:
            # An edit changes the settings it names and keeps the others.
            out["config"] = _kind_config(kind, {**(judge.config if judge else {}), **config}, problems)
    problems += _key_moves(judge, data, out)
    if "api_key" in data:
        key = data["api_key"]
        if kind != Judge.Kind.CHAT:
            problems.append(problem("only a chat judge has a key.", field="api_key"))
        elif not isinstance(key, str) or len(key) > MAX_KEY or any(ch in key for ch in "\r\n\0"):
            problems.append(problem('the key as one line of text (or "" to remove the stored one).', field="api_key"))
        else:
            out["secret"] = secret_seal(key.strip()) if key.strip() else ""
    if problems:
        raise ArbiterError(
            "The judge was not saved: " + "; ".join(f"{p['field']}: {p['message']}" for p in problems[:5]),
            details=problems,
        )
    if judge is None:
        out["kind"] = kind
    return out


def _key_moves(judge: Judge | None, data: dict, out: dict) -> list[dict]:
    """A key follows its endpoint to another scheme, host or port only when someone says so with
    the move: a stored key given again (or removed), a variable named again (or cleared)."""
    if judge is None or "config" not in out:
        return []
    if endpoint(out["config"].get("base_url")) == endpoint(judge.config.get("base_url")):
        return []
    problems = []
    if judge.secret and "api_key" not in data:
        problems.append(
            problem(
                "the base URL now points elsewhere (another scheme, host or port), and the stored key was given for "
                'the old one: give the key again (api_key), or remove it (api_key ""), with this change.',
                field="api_key",
            )
        )
    env_name = judge.config.get("api_key_env")
    if env_name and "api_key_env" not in data.get("config", {}):
        problems.append(
            problem(
                f"the base URL now points elsewhere (another scheme, host or port), and the key in ${env_name} was "
                "named for the old one: name the variable again (config.api_key_env) to send its key there, or "
                'clear it (api_key_env ""), with this change.',
                field="config.api_key_env",
            )
        )
    return problems


@transaction.atomic
def judge_create(*, data: dict, created_by) -> Judge:
    return Judge.objects.create(created_by=created_by, **judge_clean(data))


@transaction.atomic
def judge_update(*, judge: Judge, data: dict) -> Judge:
    judge = Judge.objects.select_for_update().get(pk=judge.pk)
    for key, value in judge_clean(data, judge=judge).items():
        setattr(judge, key, value)
    judge.save()
    return judge


@transaction.atomic
def judge_delete(*, judge: Judge) -> None:
    votes = JudgeVote.objects.filter(judge=judge).count()
    if votes:
        raise ArbiterError(f"{judge.name} has {votes} votes stored; a judge with votes is kept for their record.")
    judge.delete()


def judge_key_source(judge: Judge) -> str:
    """Where a chat judge's key comes from, in words (never the key): stored, env:NAME or none."""
    if judge.secret:
        return "stored"
    if judge.config.get("api_key_env"):
        return f"env:{judge.config['api_key_env']}"
    return "none"


def judge_api_key(judge: Judge) -> str:
    if judge.secret:
        return secret_open(judge.secret, what=f"The API key of judge {judge.name}")
    name = judge.config.get("api_key_env")
    if name:
        if name not in os.environ:
            raise ArbiterError(f"Judge {judge.name} reads its key from ${name}, which is not set on this worker.")
        return os.environ[name]
    return ""


def chat_settings(judge: Judge) -> ChatJudgeSettings:
    values = {k: v for k, v in judge.config.items() if k in CHAT_FIELDS}
    return ChatJudgeSettings(api_key=judge_api_key(judge), **values)


# --- A run over a campaign ---------------------------------------------------------------------


@dataclass(frozen=True)
class RunOptions:
    swapped_share: float = 0.2
    repeat_share: float = 0.2
    count_toward_votes: bool = False
    include_complete: bool = True
    max_comparisons: int = 0
    then_order: bool = False
    seed: int = 0


def probe_drawn(seed: int, comparison_id: int, probe: str, share: float) -> bool:
    """A seeded draw per comparison and probe: the same on a resume."""
    if share <= 0:
        return False
    digest = hashlib.sha256(f"{seed}|{comparison_id}|{probe}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def _wanted(campaign: Campaign, comparison_ids: list[int], judge: Judge, options: RunOptions) -> list[tuple[int, str]]:
    """(comparison, probe) pairs this run should ask, in comparison order, without those answered."""
    done = set(
        JudgeVote.objects.filter(judge=judge, comparison__campaign=campaign).values_list("comparison_id", "probe")
    )
    wanted = []
    for cid in comparison_ids:
        for probe, share in (
            (JudgeVote.Probe.FIRST, 1.0),
            (JudgeVote.Probe.SWAPPED, options.swapped_share),
            (JudgeVote.Probe.REPEAT, options.repeat_share),
        ):
            if (cid, probe) not in done and (
                probe == JudgeVote.Probe.FIRST or probe_drawn(options.seed, cid, probe, share)
            ):
                wanted.append((cid, probe))
    return wanted


def campaign_comparison_ids(campaign: Campaign, options: RunOptions) -> list[int]:
    rows = Comparison.objects.filter(campaign=campaign, is_gold=False).exclude(status=Comparison.Status.RETIRED)
    if not options.include_complete:
        rows = rows.filter(status=Comparison.Status.OPEN)
    ids = list(rows.order_by("id").values_list("id", flat=True))
    return ids[: options.max_comparisons] if options.max_comparisons else ids


@dataclass
class Tally:
    asked: int = 0
    voted: int = 0
    failed: int = 0
    no_answer_known: int = 0
    counted: int = 0
    spent_usd: float = 0.0
    stopped: str | None = None
    ordered: int = 0  # open comparisons given a disagreement-first priority afterwards (then_order)
    first_error: str = ""  # why the first failed answer failed, for a run that stored nothing
    stop_reason: str = ""  # why the client gave up on the endpoint (stopped == "failing"), in one line


def _store(judge, comparison, probe, vote: VoteIn, *, run_id, options, tally: Tally) -> None:
    rows = judge_votes_store(
        judge=judge, comparison=comparison, votes=[vote], run_id=run_id, count_toward_votes=options.count_toward_votes
    )
    tally.voted += 1
    tally.counted += sum(r.counted for r in rows if r.probe == JudgeVote.Probe.FIRST)


def _comparisons(ids) -> dict[int, Comparison]:
    return Comparison.objects.select_related("campaign", "task", "trajectory_a", "trajectory_b").in_bulk(list(ids))


def _run_rubric(judge, wanted, *, run_id, options, tally, progress, should_stop) -> None:
    for start in range(0, len(wanted), 200):
        chunk = wanted[start : start + 200]
        rows = _comparisons({cid for cid, _ in chunk})
        for cid, probe in chunk:
            c = rows[cid]
            found = rubric_vote(
                outcome_a=c.trajectory_a.outcome,
                outcome_b=c.trajectory_b.outcome,
                answer_a=c.trajectory_a.answer,
                answer_b=c.trajectory_b.answer,
                reference=c.task.reference_answer,
            )
            tally.asked += 1
            if found is None:
                tally.no_answer_known += 1
                continue
            choice, both_bad = found
            _store(judge, c, probe, VoteIn(probe, choice, both_bad), run_id=run_id, options=options, tally=tally)
        progress(start + len(chunk))
        if should_stop():
            tally.stopped = "stopped"
            return


def _run_reward_model(judge, wanted, *, run_id, options, tally, progress, should_stop, device) -> None:

    model = RewardModel.objects.filter(pk=judge.config.get("reward_model_id")).first()
    if model is None:
        raise ArbiterError(f"Judge {judge.name}'s reward model (id {judge.config.get('reward_model_id')}) is gone.")
    scorer = RewardScorer(model.model_dir, device=device)
    for start in range(0, len(wanted), 64):
        chunk = wanted[start : start + 64]
        rows = _comparisons({cid for cid, _ in chunk})
        # Swapped probes score B then A: a reward model scores each side alone, so this measures
        # (and should show no) position effect; a repeat scores again.
        items = []
        for cid, probe in chunk:
            c = rows[cid]
            sides = (
                (c.trajectory_b, c.trajectory_a)
                if probe == JudgeVote.Probe.SWAPPED
                else (c.trajectory_a, c.trajectory_b)
            )
            items += [(c.task.prompt, t.steps) for t in sides]
        scores = scorer.score_episodes(items)
        for i, (cid, probe) in enumerate(chunk):
            first, second = scores[2 * i], scores[2 * i + 1]
            score_a, score_b = (second, first) if probe == JudgeVote.Probe.SWAPPED else (first, second)
            choice, p = reward_model_vote(score_a, score_b)
            tally.asked += 1
            vote = VoteIn(probe, choice, probability_a=p, rationale=f"scores A {score_a:.4f}, B {score_b:.4f}")
            _store(judge, rows[cid], probe, vote, run_id=run_id, options=options, tally=tally)
        progress(start + len(chunk))
        if should_stop():
            tally.stopped = "stopped"
            return


def _chat_items(wanted, dimensions, schema):
    """(key, messages) for each wanted (comparison, probe), read from the database in chunks."""
    for start in range(0, len(wanted), 200):
        chunk = wanted[start : start + 200]
        rows = _comparisons({cid for cid, _ in chunk})
        for cid, probe in chunk:
            c = rows[cid]
            swapped = probe == JudgeVote.Probe.SWAPPED
            first, second = (c.trajectory_b, c.trajectory_a) if swapped else (c.trajectory_a, c.trajectory_b)
            messages = judge_messages(
                guidelines=c.campaign.guidelines,
                dimensions=dimensions,
                task_prompt=c.task.prompt,
                first=(first.steps, first.answer),
                second=(second.steps, second.answer),
                schema=schema,
            )
            yield (c, probe, (len(first.steps), len(second.steps))), messages


def _vote_from_answer(answer: dict, *, probe: str, dimensions, step_counts) -> VoteIn:
    """The chat model's answer read by the same rules as a person's judgement (judgement_parse)."""
    verdict = judgement_parse(answer_body(answer), dimensions=dimensions, step_counts=step_counts)
    ab = verdict_in_ab_terms(verdict, left_is_a=probe != JudgeVote.Probe.SWAPPED)
    return VoteIn(
        probe=probe,
        choice=ab["choice"],
        both_bad=verdict.both_bad,
        ratings=ab["ratings"],
        first_wrong_step_a=ab["first_wrong_step_a"],
        first_wrong_step_b=ab["first_wrong_step_b"],
        rationale=verdict.rationale,
    )


def _audit(judge, run_id, comparison, probe, answer: ChatAnswer, refused: str = "") -> None:
    records = []
    for i, call in enumerate(answer.calls):
        last = i == len(answer.calls) - 1
        status, error = call.status, call.error
        if last and refused and status == JudgeCall.Status.OK:
            status, error = JudgeCall.Status.INVALID, refused
        records.append(
            JudgeCall(
                judge=judge,
                run_id=run_id,
                comparison=comparison,
                probe=probe,
                attempt=call.attempt,
                status=status,
                http_status=call.http_status,
                error=error[:5000],
                structured_output=call.structured_output,
                request=call.request,
                response=call.response_text,
                latency_s=call.latency_s,
                prompt_tokens=call.prompt_tokens,
                completion_tokens=call.completion_tokens,
                cost_usd=call.cost_usd,
            )
        )
    JudgeCall.objects.bulk_create(records)


def run_spent_usd(run_id: int | None) -> float:
    """What a run's calls have cost so far (a resumed run's cap counts them); 0 outside a run."""
    if run_id is None:
        return 0.0
    return JudgeCall.objects.filter(run_id=run_id).aggregate(s=Sum("cost_usd"))["s"] or 0.0


def _run_chat(judge, campaign, wanted, *, run_id, options, tally, progress, should_stop) -> None:
    dimensions = dimensions_of(campaign)
    schema = verdict_schema(dimensions)
    client = ChatJudgeClient(
        chat_settings(judge),
        schema=schema,
        spent_usd=run_spent_usd(run_id),
        allow_private=django_settings.JUDGE_ALLOW_PRIVATE_ADDRESSES,
    )
    done = 0

    def on_answer(answer: ChatAnswer) -> None:
        nonlocal done
        if not answer.calls:  # never sent: a cancel or the cost cap stopped the run first
            return
        comparison, probe, step_counts = answer.key
        tally.asked += 1
        vote, refused = None, ""
        if answer.answer is None:
            tally.failed += 1
            tally.first_error = tally.first_error or answer.error or (answer.calls[-1].error if answer.calls else "")
        else:
            try:
                vote = _vote_from_answer(answer.answer, probe=probe, dimensions=dimensions, step_counts=step_counts)
            except (ValueError, JudgementInputError) as exc:
                refused = f"The answer is not a verdict this campaign takes: {getattr(exc, 'message', str(exc))}"
                tally.failed += 1
                tally.first_error = tally.first_error or refused
        with transaction.atomic():  # the vote and the record of the calls that paid for it, together
            if vote is not None:
                _store(judge, comparison, probe, vote, run_id=run_id, options=options, tally=tally)
            _audit(judge, run_id, comparison, probe, answer, refused)
        if not answer.stopped:  # one cut short (a stop, the cap, the client giving up) is asked again on a resume
            done += 1
            progress(done)

    with client:  # its kept-alive connections close with the run
        summary = client.ask_many(_chat_items(wanted, dimensions, schema), on_answer=on_answer, should_stop=should_stop)
    tally.spent_usd = client.spent_usd
    tally.stopped = summary.get("stopped")
    tally.stop_reason = client.stop_reason


def judge_run_execute(
    *, judge: Judge, campaign: Campaign, options: RunOptions, run_id: int | None, progress, should_stop, device="cpu"
) -> Tally:
    """Ask the judge about the campaign's comparisons it has not answered; store every answer.

    `progress(done, total)` after each answer or batch; `should_stop()` is polled (a cancel).
    Raises ArbiterError for what the run cannot do at all (no comparisons, the judge's model
    gone, its key missing); a stop by cancel or the cost cap is in the tally.
    """
    ids = campaign_comparison_ids(campaign, options)
    if not ids:
        raise ArbiterError(f"{campaign.name} has no comparison for a judge (gold ones are left out).")
    wanted = _wanted(campaign, ids, judge, options)
    tally = Tally()
    total = len(wanted)

    def report(done: int) -> None:
        progress(done, total)

    kwargs = {"run_id": run_id, "options": options, "tally": tally, "progress": report, "should_stop": should_stop}
    if wanted:
        if judge.kind == Judge.Kind.RUBRIC:
            _run_rubric(judge, wanted, **kwargs)
        elif judge.kind == Judge.Kind.REWARD_MODEL:
            _run_reward_model(judge, wanted, device=device, **kwargs)
        else:
            _run_chat(judge, campaign, wanted, **kwargs)
    if (
        options.then_order
        and tally.stopped is None
        and JudgeVote.objects.filter(comparison__campaign=campaign).exists()
    ):
        tally.ordered = campaign_order(campaign=campaign, ordering="disagreement_first")
    return tally
