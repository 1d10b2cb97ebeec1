"""Django glue for the agent world: scripted trajectories into the database, and simulated
annotators labeling a campaign through the same assignment service people use."""

from __future__ import annotations

import random
from dataclasses import dataclass

from django.contrib.auth import get_user_model

from annotate.models import Campaign, Comparison, Trajectory
from annotate.services.assignments import Verdict, assignment_next, assignment_skip, judgement_submit
from annotate.services.comparisons import comparisons_build
from annotate.services.imports import trajectories_import_objects
from training.envs.base import EpisodeRunner
from training.envs.mistakes import Mistakes
from training.envs.registry import get_environment
from training.envs.services import environment_get
from training.policy.episodes import play_scripted
from training.policy.parsers import CompactParser
from training.simulated_annotators import AnnotatorProfile, simulated_choice
from webapp.errors import ArbiterError
from webapp.roles import Role, user_role_set

SCRIPTED_AGENTS = {
    "scripted-careful": Mistakes(wrong_result=0.05, redundant_search=0.05, no_evidence=0.02, invalid_action=0.02),
    "scripted-hasty": Mistakes(wrong_result=0.3, redundant_search=0.1, no_evidence=0.25, invalid_action=0.15),
}


@dataclass
class GenerationReport:
    trajectories: int
    duplicates: int
    comparisons: int
    success_rate: float


def scripted_trajectories_generate(
    *,
    campaign: Campaign | None,
    n_tasks: int,
    split: str = "train",
    samples_per_agent: int = 1,
    seed: int = 0,
    corpus_seed: int = 0,
    world: dict | None = None,
) -> GenerationReport:
    """Run the scripted agents on encyclopedia tasks and store their trajectories (and comparisons).
    `world`: options of the generated world (training/envs/encyclopedia/corpus.py `generate_corpus`,
    e.g. {"namesakes": 0}), for a world other than the default."""
    if n_tasks < 1 or samples_per_agent < 1:
        raise ArbiterError("n_tasks and samples_per_agent must be at least 1.")
    if corpus_seed == 0 and not world:
        env = environment_get("encyclopedia")
    else:
        env = get_environment("encyclopedia", seed=corpus_seed, **(world or {}))
    tasks = env.tasks(split)
    rng = random.Random(seed)
    rng.shuffle(tasks)
    tasks = tasks[:n_tasks]
    runner = EpisodeRunner(env)
    writer = CompactParser(list(runner.tools.values()))
    objects, correct = [], 0
    for name, mistakes in SCRIPTED_AGENTS.items():
        turns = env.demonstrator(seed=seed * 1000 + len(name), mistakes=mistakes)
        for task in tasks:
            for _ in range(samples_per_agent):
                episode = play_scripted(runner, task, turns, writer)
                correct += episode.outcome.correct
                objects.append(episode.trajectory(agent=name, version="1"))
    report = trajectories_import_objects(objects=objects, campaign=None)
    comparisons = 0
    if campaign is not None:
        task_ids = list(
            Trajectory.objects.filter(pk__in=report.trajectory_ids).values_list("task_id", flat=True).distinct()
        )
        comparisons = comparisons_build(campaign=campaign, task_ids=task_ids, max_per_task=4)
    return GenerationReport(report.created, report.duplicates, comparisons, correct / len(objects))


def simulated_annotators_ensure(*, count: int, prefix: str = "sim-annotator") -> list:
    """`count` synthetic annotator users (created once, reused)."""
    User = get_user_model()
    users = []
    for i in range(count):
        user, created = User.objects.get_or_create(username=f"{prefix}-{i + 1}", defaults={"is_synthetic": True})
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
            user_role_set(user=user, roles=[Role.ANNOTATOR])
        elif not user.is_synthetic:
            raise ArbiterError(f"{user.username} exists and is not a simulated annotator.")
        users.append(user)
    return users


def _outcomes(campaign: Campaign) -> dict[int, tuple[dict, dict]]:
    """Each comparison's two outcomes, read once (not each comparison's two whole trajectories)."""
    rows = Comparison.objects.filter(campaign=campaign).values_list(
        "id", "trajectory_a__outcome", "trajectory_b__outcome"
    )
    return {pk: (a or {}, b or {}) for pk, a, b in rows.iterator()}


def campaign_simulate_labels(
    *,
    campaign: Campaign,
    annotators: int = 3,
    profile: AnnotatorProfile = AnnotatorProfile(),
    seed: int = 0,
    limit: int | None = None,
) -> int:
    """Simulated annotators pull and judge until the campaign has nothing left for them.

    They choose by the trajectories' rubric utilities; a comparison whose trajectories
    have no known utility is skipped (with that reason), never guessed.
    """
    try:
        profile.validate()
    except ValueError as exc:
        raise ArbiterError(str(exc)) from None
    users = simulated_annotators_ensure(count=annotators)
    rng = random.Random(seed)
    made = 0
    active = list(users)
    outcomes = _outcomes(campaign)
    while active and (limit is None or made < limit):
        for user in list(active):
            assignment = assignment_next(campaign=campaign, annotator=user)
            if assignment is None:
                active.remove(user)
                continue
            if assignment.comparison_id not in outcomes:  # a comparison added since they were read
                outcomes = _outcomes(campaign)
            outcome_a, outcome_b = outcomes[assignment.comparison_id]
            a, b = profile.utility(outcome_a), profile.utility(outcome_b)
            if a is None or b is None:
                assignment_skip(assignment_id=assignment.id, annotator=user, reason="no known utility to judge by")
                continue
            choice = simulated_choice(
                utility_a=a, utility_b=b, left_is_a=assignment.left_is_a, profile=profile, rng=rng
            )
            screen = choice if assignment.left_is_a else 6 - choice
            judgement_submit(
                assignment_id=assignment.id,
                annotator=user,
                verdict=Verdict(choice=screen, both_bad=profile.both_bad(outcome_a, outcome_b)),
            )
            made += 1
            if limit is not None and made >= limit:
                break
    return made
