"""Django glue for before/after evaluations: play systems on held-out tasks, store their
figures and episodes, build blind human evaluations from them and read back the win rate.

The figures come from training/evaluation/episodes.py (no Django); this module loads the policies
and the reward model, stores every episode a figure rests on as a trajectory of its
policy, and writes the evaluation in one transaction, so a failed or cancelled run leaves
no half-written evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from annotate.models import Campaign, Comparison, Judgement, Policy, Trajectory
from training.envs.base import EpisodeRunner
from training.envs.registry import VARIANTS, variant_of
from training.envs.sampling import spread_prefix
from training.envs.services import environment_get, environment_tasks
from training.evaluation.episodes import Played, episode_kls, play, summarize, task_bootstrap
from training.evaluation.episodes import best_of_n as choose_best
from training.models import Evaluation, EvaluationEntry, EvaluationEpisode, HumanEvaluation
from training.policy.chat import ChatFormat
from training.policy.model_io import load_policy
from training.policy.services import policy_episodes_store
from training.rl.scorers import reward_model_scorer
from webapp.errors import ArbiterError


@dataclass
class System:
    """One row of the before/after table."""

    label: str
    policy: Policy
    n: int = 1  # best-of-n over the policy's samples when above 1
    is_baseline: bool = False


# Tasks the baseline's best temperature is chosen on, one episode each per candidate: 31 (the loop's
# unseen world's dev split) could not tell 0.3 from 0.5 or from greedy (issue 54); at 300 a
# 10-point difference is outside a candidate's interval.
DEV_TEMPERATURE_TASKS = 300
SEEN_MODES = ("seen_sampled", "seen_greedy")  # a world the policies trained on, beside the evaluation's own


@dataclass(frozen=True)
class _SeenWorld:
    """The held-out (eval) tasks of a world the policies trained on."""

    name: str
    runner: object
    tasks: list

    @classmethod
    def build(cls, environment: str, n_tasks: int) -> _SeenWorld | None:

        if not environment:
            return None
        env = environment_get(environment)
        tasks = environment_tasks(env, "eval", n_tasks)
        if not tasks:
            raise ArbiterError(f"The eval split of {env.name} has no tasks to compare the worlds on.")
        return cls(name=env.name, runner=EpisodeRunner(env), tasks=tasks)


def _nothing(*args, **kwargs) -> None:
    return None


def _samples_words(samples: int, group: int) -> str:
    """The config's `samples` per task, and apart the episodes best-of-n plays for them (issue 53:
    "2 samples each" was logged for a config of 1 sample with best-of-2)."""
    words = f"{samples} sample{'s' if samples != 1 else ''} each"
    return words + (f", {samples * group} episodes played so best-of-{group} can choose" if group > 1 else "")


def evaluation_execute(
    *,
    name: str,
    baseline: Policy,
    others: list[tuple[str, Policy]],
    reward_model=None,
    best_of_n: list[int] = (),
    split: str = "eval",
    n_tasks: int = 0,
    samples: int = 2,
    temperature: float = 1.0,
    greedy: bool = True,
    seed: int = 0,
    device: str = "cpu",
    run=None,
    created_by=None,
    progress=_nothing,
    log=_nothing,
    environment: str = "encyclopedia",
    task_ids: list[str] = (),
    limits: dict | None = None,
    temperatures: list[float] = (),
    seen_environment: str = "",
    seen_tasks: int = 0,
) -> Evaluation:
    """Play the baseline policy, best-of-n over it and the other policies on the same tasks;
    store the evaluation. `progress(fraction, message)` may raise to cancel.

    `temperatures`: the baseline is also played at the one of these (and greedy, and
    `temperature`) that does best on dev (`temperature_tasks`: up to DEV_TEMPERATURE_TASKS tasks
    of the environment's fresh world, else of its dev split), an honest baseline for methods that
    only sharpen the policy (WebGPT: tuning the temperature closed much of the BC-RL gap).

    `seen_environment`: every policy is also played on `seen_tasks` eval tasks of a world it
    trained on (sampled and greedy, modes `seen_sampled` and `seen_greedy`), so a gain that
    is memorisation shows as a gap between the two worlds."""
    env = environment_get(environment)
    tasks = environment_tasks(env, split, n_tasks, task_ids=list(task_ids))
    if not tasks:
        raise ArbiterError(f"The {split} split of {env.name} has no tasks.")
    if best_of_n and reward_model is None:
        raise ArbiterError("Best-of-n needs a reward model to choose with.")
    table = _Table(
        baseline=baseline,
        runner=EpisodeRunner(env),
        tasks=tasks,
        scorer=reward_model_scorer(reward_model.model_dir, device=device) if reward_model else None,
        samples=samples,
        temperature=temperature,
        greedy=greedy,
        seed=seed,
        device=device,
        limits=limits,
        seen=_SeenWorld.build(seen_environment, seen_tasks or len(tasks)),
    )
    tuned = _play_every_system(
        table, env, split, others=others, best_of_n=best_of_n, temperatures=temperatures, progress=progress, log=log
    )
    progress(0.96, "storing the episodes")
    config = {
        "environment": env.name,
        **(limits or {}),
        "split": split,
        "tasks": len(tasks),
        "samples": samples,
        "temperature": temperature,
        "greedy": greedy,
        "best_of_n": sorted(set(best_of_n)),
        "seed": seed,
        **({"best_temperature": tuned} if tuned is not None else {}),
        **table.seen_config(),
    }
    return _store(
        name=name,
        run=run,
        baseline=baseline,
        reward_model=reward_model,
        config=config,
        plays=table.plays,
        summarize=summarize,
        created_by=created_by,
    )


def _play_every_system(table, env, split, *, others, best_of_n, temperatures, progress, log) -> dict | None:
    """Play the baseline (with best-of-n over it, at its best temperature when `temperatures` are
    given, and greedy), then each other policy, into `table.plays`; returns the temperature
    tuning's figures (None without it)."""
    units = 1 + len(others)

    def stage(done: float, message: str) -> None:
        progress(min(0.95, done / units), message)
        log(message)

    group = max([1, *best_of_n])
    tasks = len(table.tasks)
    stage(0, f"Playing {table.baseline} on {tasks} {split} tasks ({_samples_words(table.samples, group)}).")
    table.play_baseline(sorted(set(best_of_n)))
    tuned = _best_temperature(table, env, split, temperatures, log=log) if temperatures else None
    if tuned is not None and tuned["chosen"] != table.temperature:
        stage(0, f"Playing {table.baseline} at {_temperature_words(tuned['chosen'])}, its best temperature on dev.")
        table.play_baseline_at(tuned["chosen"])
    if table.greedy:
        table.plays.append((table.base, "greedy", table.play_row(table.reference, 1, 0.0)))
    table.play_seen(table.base, table.reference, stage)
    for done, (label, policy) in enumerate(others, start=1):
        stage(done, f"Playing {policy} on {tasks} {split} tasks.")
        table.play_other(label, policy)
    return tuned


class _Table:
    """The rows of an evaluation as they are played: every policy on the same tasks, with the
    same seeds, chat format and limits, scored by the reward model when there is one."""

    def __init__(self, *, baseline, runner, tasks, scorer, samples, temperature, greedy, seed, device, limits, seen):

        self.baseline, self.runner, self.tasks, self.scorer = baseline, runner, tasks, scorer
        self.samples, self.temperature, self.greedy, self.seed = samples, temperature, greedy, seed
        self.device, self.limits, self.seen = device, limits, seen
        self.reference, self.tokenizer = load_policy(baseline.model_dir, device=device)
        self.chat = ChatFormat.for_policy(self.tokenizer, baseline.model_dir)
        self.base = System(label=f"{baseline} (start)", policy=baseline, is_baseline=True)
        self.plays: list[tuple[System, str, object]] = []  # (system, mode, Played)

    def seen_config(self) -> dict:
        return {"seen_environment": self.seen.name, "seen_tasks": len(self.seen.tasks)} if self.seen else {}

    def play_row(self, model, samples: int, temperature: float):
        """`samples` episodes of `model` per task at `temperature`, scored: one row of the table."""
        played = Played(
            play(
                model,
                self.tokenizer,
                self.runner,
                self.tasks,
                samples=samples,
                temperature=temperature,
                seed=self.seed,
                chat=self.chat,
                limits=self.limits,
            )
        )
        if self.scorer is not None:
            flat = self.scorer([e for episodes in played.episodes for e in episodes])
            at = 0
            played.rm_scores = []
            for episodes in played.episodes:
                played.rm_scores.append(flat[at : at + len(episodes)])
                at += len(episodes)
        return played

    def play_baseline(self, best_of_n: list[int]) -> None:
        """The start sampled, and best-of-n over the same samples (`samples * n` per task)."""
        group = max([1, *best_of_n])
        sampled = self.play_row(self.reference, self.samples * group, self.temperature)
        first = choose_best(sampled, 1, group=group)
        first.kls = [[0.0] * len(e) for e in first.episodes]  # the reference itself
        self.plays.append((self.base, "sampled", first))
        for n in best_of_n:
            system = System(label=f"best-of-{n} over {self.baseline}", policy=self.baseline, n=n)
            self.plays.append((system, "sampled", choose_best(sampled, n, group=group)))

    def play_baseline_at(self, temperature: float) -> None:
        """The start at its best temperature on dev, the honest baseline of a sharpening method
        (greedy among them: one episode per task, as every greedy row)."""
        label = f"{self.baseline} (start) at {_temperature_words(temperature)}, best on dev"
        at_best = self.play_row(self.reference, self.samples if temperature > 0 else 1, temperature)
        self.plays.append((System(label=label, policy=self.baseline), "sampled", at_best))

    def play_other(self, label: str, policy) -> None:
        """Another policy sampled (with its KL to the start), greedy, and on the seen world."""
        model, own_tokenizer = load_policy(policy.model_dir, device=self.device)
        if own_tokenizer.get_vocab() != self.tokenizer.get_vocab():
            raise ArbiterError(
                f"{policy} does not share {self.baseline}'s tokenizer, so its KL to it cannot be measured."
            )
        system = System(label=label, policy=policy)
        sampled = self.play_row(model, self.samples, self.temperature)
        flat = episode_kls(
            [e for episodes in sampled.episodes for e in episodes],
            model,
            self.reference,
            self.tokenizer,
            temperature=self.temperature,
        )
        sampled.kls = [flat[i * self.samples : (i + 1) * self.samples] for i in range(len(self.tasks))]
        self.plays.append((system, "sampled", sampled))
        if self.greedy:
            self.plays.append((system, "greedy", self.play_row(model, 1, 0.0)))
        self.play_seen(system, model)

    def play_seen(self, system: System, model, stage=None) -> None:
        """The system on the seen world's held-out tasks, sampled and greedy, where asked."""
        if self.seen is None:
            return
        if stage is not None:
            stage(
                0,
                f"Playing {system.policy} on {len(self.seen.tasks)} held-out tasks of {self.seen.name}, a world it trained on.",
            )
        for mode, n, t in (("seen_sampled", self.samples, self.temperature), ("seen_greedy", 1, 0.0)):
            if mode == "seen_greedy" and not self.greedy:
                continue
            episodes = play(
                model,
                self.tokenizer,
                self.seen.runner,
                self.seen.tasks,
                samples=n,
                temperature=t,
                seed=self.seed,
                chat=self.chat,
                limits=self.limits,
            )
            self.plays.append((system, mode, Played(episodes)))


@transaction.atomic
def _store(*, name, run, baseline, reward_model, config, plays, summarize, created_by) -> Evaluation:

    evaluation = Evaluation.objects.create(
        name=name[:200],
        run=run,
        split=config["split"],
        reference_policy=baseline,
        reward_model=reward_model,
        config=config,
        created_by=created_by,
    )
    entries: dict[str, EvaluationEntry] = {}
    for system, _, _ in plays:
        if system.label not in entries:
            entries[system.label] = EvaluationEntry.objects.create(
                evaluation=evaluation,
                label=system.label[:200],
                policy=system.policy,
                n=system.n,
                is_baseline=system.is_baseline,
                position=len(entries),
                kind=EvaluationEntry.Kind.BEST_OF_N if system.n > 1 else EvaluationEntry.Kind.POLICY,
            )
    for system, mode, played in plays:
        entry = entries[system.label]
        entry.metrics[mode] = summarize(played)
        if mode in SEEN_MODES:
            continue  # figures only: the episodes of the evaluation's own tasks are the ones stored to read
        flat = [(t, s, e) for t, episodes in enumerate(played.episodes) for s, e in enumerate(episodes)]
        report = policy_episodes_store(episodes=[e for _, _, e in flat], policy=system.policy, metadata={"mode": mode})
        task_ids = dict(Trajectory.objects.filter(pk__in=report.trajectory_ids).values_list("pk", "task_id"))
        EvaluationEpisode.objects.bulk_create(
            [
                EvaluationEpisode(
                    entry=entry,
                    task_id=task_ids[trajectory_id],
                    trajectory_id=trajectory_id,
                    mode=mode,
                    sample=s,
                    correct=e.outcome.correct,
                    rm_score=played.rm_scores[t][s] if played.rm_scores else None,
                    kl=played.kls[t][s] if played.kls else None,
                )
                for trajectory_id, (t, s, e) in zip(report.trajectory_ids, flat)
            ]
        )
    for entry in entries.values():
        entry.save(update_fields=["metrics", "updated_at"])
    return evaluation


# --- Blind human evaluation ----------------------------------------------------------------

HUMAN_EVAL_GUIDELINES = """\
## Blind evaluation
Two agents answered the same question by searching and reading a fictional encyclopedia.
The sides are shuffled and the agents are not named. Pick the trajectory you would rather
trust: a correct answer backed by a quote from a page the agent opened beats everything;
then fewer wasted steps and no tool errors. Use *tie* only when neither is better.
"""


def _temperature_words(temperature: float) -> str:
    """A temperature as a row's label and the log say it: "T=0.5", or "T=0 (greedy)"."""
    return f"T={temperature:g}" + (" (greedy)" if temperature == 0 else "")


def temperature_tasks(env, split: str) -> tuple[object, list, str]:
    """(the world, its tasks, which of its splits) the start's best temperature is chosen on: the
    fresh variant of the environment (of the one it is a variant of, for an unseen world) where
    there is one, every split (no training step imitates it; where RL chooses its checkpoints,
    training/rl/dev.py); else the environment's dev split (its train split when dev is the one
    evaluated). At most DEV_TEMPERATURE_TASKS, every kind of question in proportion."""
    fresh = variant_of(env.name, "fresh")
    if fresh == env.name and env.name in VARIANTS:
        fresh = variant_of(VARIANTS[env.name][0], "fresh")
    if fresh != env.name:
        world = environment_get(fresh)
        tasks = [t for part in ("train", "dev", "eval") for t in world.tasks(part)]
        return world, spread_prefix(tasks, DEV_TEMPERATURE_TASKS), "every split"
    chosen_on = "train" if split == "dev" else "dev"
    return env, spread_prefix(env.tasks(chosen_on), DEV_TEMPERATURE_TASKS), chosen_on


def _best_temperature(table, env, split: str, candidates, *, log) -> dict | None:
    """The temperature among greedy (0), `candidates` and the evaluation's own at which the
    baseline does best on dev (`temperature_tasks`: the same tasks and seeds for every candidate,
    one episode each), with each one's success, its 95% interval over tasks and n; None without
    tasks to choose on."""
    world, tasks, chosen_on = temperature_tasks(env, split)
    if not tasks:
        log(
            f"No {chosen_on} tasks to choose the baseline's temperature on; it is played at T={table.temperature:g} only."
        )
        return None
    runner = table.runner if world is env else EpisodeRunner(world)
    figures = {}
    for t in sorted({0.0, *candidates, table.temperature}):
        episodes = play(
            table.reference,
            table.tokenizer,
            runner,
            tasks,
            samples=1,
            temperature=t,
            seed=table.seed + 1,
            chat=table.chat,
            limits=table.limits,
        )
        figures[t] = task_bootstrap([[float(e.outcome.correct) for e in row] for row in episodes], seed=table.seed)
    chosen = max(figures, key=lambda t: (figures[t]["mean"], t))  # a tie goes to the higher temperature
    log(
        f"Baseline success on {len(tasks)} tasks of {world.name} ({chosen_on}) by temperature, 95% intervals over "
        "tasks: "
        + ", ".join(
            f"{_temperature_words(t)} {f['mean']:.1%} [{f['low']:.1%}, {f['high']:.1%}]" for t, f in figures.items()
        )
        + f"; {_temperature_words(chosen)} is its best."
    )
    return {
        "chosen": chosen,
        "chosen_on": chosen_on,
        "environment": world.name,
        "tasks": len(tasks),
        "dev_success": {f"{t:g}": f["mean"] for t, f in figures.items()},
        "candidates": [
            {"temperature": t, "success": f["mean"], "low": f["low"], "high": f["high"], "n": f["tasks"]}
            for t, f in figures.items()
        ],
    }


@transaction.atomic
def human_evaluation_create(
    *,
    evaluation: Evaluation,
    candidate: EvaluationEntry,
    mode: str = "sampled",
    votes_per_comparison: int = 3,
    against: EvaluationEntry | None = None,
    created_by=None,
) -> HumanEvaluation:
    """A blind campaign with one comparison per task: the episode of `against` (the baseline
    unless given: DPO against the RL policy, say) against the candidate's, sample 0 of `mode`.
    Tasks where both sides did exactly the same are left out and counted. A comparison stores
    its trajectories in id order (a database rule), so either side may be A;
    `human_evaluation_result` reads each vote from the candidate's side."""
    baseline = against or evaluation.entries.filter(is_baseline=True).first()
    if baseline is None:
        raise ArbiterError("This evaluation has no baseline to compare with.")
    if baseline.evaluation_id != evaluation.pk:
        raise ArbiterError("against: choose a system of this evaluation.")
    if candidate.evaluation_id != evaluation.pk or candidate.pk == baseline.pk:
        raise ArbiterError(f"Choose a system of this evaluation other than {baseline.label}.")
    if mode not in EvaluationEpisode.Mode.values:
        raise ArbiterError(f"mode: one of {', '.join(EvaluationEpisode.Mode.values)}.")
    if not 1 <= votes_per_comparison <= 20:
        raise ArbiterError("votes_per_comparison: between 1 and 20.")

    def by_task(entry):
        return {
            e.task_id: e.trajectory
            for e in EvaluationEpisode.objects.filter(entry=entry, mode=mode, sample=0).select_related("trajectory")
        }

    before, after = by_task(baseline), by_task(candidate)
    if not after:
        raise ArbiterError(f"{candidate.label} has no {mode} episodes.")
    pairs, identical = [], 0
    for task_id in sorted(set(before) & set(after)):
        a, b = before[task_id], after[task_id]
        if a.pk == b.pk or (a.steps == b.steps and a.answer == b.answer):
            identical += 1
            continue
        pairs.append((task_id, *sorted((a, b), key=lambda t: t.pk)))
    if not pairs:
        raise ArbiterError(
            f"{candidate.label} did exactly what the baseline did on every task ({mode}); "
            f"there is nothing for people to compare."
        )
    existing = HumanEvaluation.objects.filter(evaluation=evaluation, candidate=candidate, baseline=baseline, mode=mode)
    if existing.exists():
        raise ArbiterError(
            f"A blind evaluation of {candidate.label} against {baseline.label} ({mode}) exists already: "
            f"campaign {existing.first().campaign.name!r}."
        )
    # Annotators see the campaign's name (home page, above every comparison): a neutral one, so the
    # evaluation stays blind. The systems are named on the evaluation page, to researchers and admins.
    number = HumanEvaluation.objects.filter(evaluation=evaluation).count() + 1
    name = f"Blind evaluation {evaluation.pk}-{number}"
    while Campaign.objects.filter(name=name).exists():
        number += 1
        name = f"Blind evaluation {evaluation.pk}-{number}"
    campaign = Campaign.objects.create(
        name=name[:200],
        guidelines=HUMAN_EVAL_GUIDELINES,
        votes_per_comparison=votes_per_comparison,
        created_by=created_by,
    )
    Comparison.objects.bulk_create(
        [Comparison(campaign=campaign, task_id=task_id, trajectory_a=a, trajectory_b=b) for task_id, a, b in pairs]
    )
    return HumanEvaluation.objects.create(
        evaluation=evaluation,
        campaign=campaign,
        baseline=baseline,
        candidate=candidate,
        mode=mode,
        identical_pairs=identical,
    )


def human_evaluation_result(human_eval: HumanEvaluation) -> dict:
    """The candidate's win rate over the baseline from the campaign's votes: a win counts 1, a
    tie 1/2 (WebGPT's soft label), with a 95% bootstrap interval over comparisons."""
    candidate_ids = set(
        EvaluationEpisode.objects.filter(entry=human_eval.candidate, mode=human_eval.mode, sample=0).values_list(
            "trajectory_id", flat=True
        )
    )
    votes: dict[int, list[float]] = {}
    for comparison_id, choice, a_id in Judgement.objects.filter(comparison__campaign=human_eval.campaign).values_list(
        "comparison_id", "choice", "comparison__trajectory_a_id"
    ):
        choice = 6 - choice if a_id in candidate_ids else choice  # in candidate terms: above 3 is a win
        votes.setdefault(comparison_id, []).append(1.0 if choice > 3 else (0.5 if choice == 3 else 0.0))
    result = task_bootstrap(list(votes.values()))
    total = Comparison.objects.filter(campaign=human_eval.campaign).count()
    flat = [v for values in votes.values() for v in values]
    return {
        "win_rate": result["mean"],
        "low": result["low"],
        "high": result["high"],
        # The figure as every interval on a page is shown (webapp/templatetags: none below 10 units).
        "figure": {"mean": result["mean"], "low": result["low"], "high": result["high"], "units": len(votes)},
        "votes": len(flat),
        "comparisons_judged": len(votes),
        "comparisons": total,
        "identical_pairs": human_eval.identical_pairs,
        "wins": sum(v == 1.0 for v in flat),
        "ties": sum(v == 0.5 for v in flat),
        "losses": sum(v == 0.0 for v in flat),
    }
