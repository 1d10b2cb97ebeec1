"""The demonstrator's habits: situations every world makes, read from words and not names, and
habits that do what docs/agent.md says (one never right in its situation)."""

import hashlib
import json
from collections import Counter

import pytest

from training.envs.base import EpisodeRunner
from training.envs.encyclopedia.browser import TextBrowser
from training.envs.encyclopedia.corpus import generate_corpus, generate_tasks
from training.envs.encyclopedia.environment import EncyclopediaEnvironment
from training.envs.encyclopedia.habits import OTHER, SITUATIONS, situation_of
from training.envs.encyclopedia.scripted import ScriptedAgent
from training.envs.mistakes import DEMONSTRATORS, SLIPS, Habits, Mistakes, demonstrator_rates
from training.policy.bc import play_demonstrations
from training.policy.bc_config import BCConfig, demonstrator_choice_problems
from training.policy.episodes import play_scripted
from training.policy.parsers import PARSERS

SMALL = {"n_places": 20, "n_people": 40, "n_orgs": 15}


def _shares(env) -> Counter:
    tasks = [t for split in ("train", "dev", "eval") for t in env.tasks(split)]
    counts = Counter(t.metadata["situation"] for t in tasks)
    return Counter({k: v / len(tasks) for k, v in counts.items()})


def test_every_habit_situation_is_made_by_held_out_worlds_as_often_as_by_training_worlds():
    """A habit whose cue existed only in the training worlds could be learnt as a name, not a
    situation: every situation must come up in worlds no training sees, at its training share."""
    training = [_shares(EncyclopediaEnvironment(seed=s)) for s in (0, 7)]
    held_out = [_shares(EncyclopediaEnvironment(seed=s, unseen=True)) for s in (10_000, 10_003)]
    for situation in SITUATIONS:
        share = min(c[situation] for c in training)
        assert share > 0.05, situation
        for counts in held_out:
            assert counts[situation] >= 0.5 * share, (situation, counts)


def test_a_situation_is_read_from_the_question_shape_not_its_names():
    """Every task keeps its situation when the entity it asks about is renamed to a name no world
    has: the cue is the shape of the question, present wherever that shape is asked."""
    for env in (EncyclopediaEnvironment(seed=0, **SMALL), EncyclopediaEnvironment(seed=10_002, unseen=True, **SMALL)):
        for spec in env._specs:
            renamed = spec.question.replace(spec.entity.split(" ")[0], "Qqzx")
            assert renamed != spec.question
            assert situation_of(renamed) == situation_of(spec.question) == _situation_by_kind(spec.qtype)
    assert situation_of("In which town was Qqzx Vvyw born?") == OTHER


def _situation_by_kind(qtype: str) -> str:
    return {
        "person_employer_founder": "employer_headquarters",
        "org_founder_birthplace": "headquarters_first_page",
    }.get(qtype, OTHER)


def _played(env, name: str, seed: int = 0):
    mistakes, habits = demonstrator_rates(name, SLIPS)
    runner = EpisodeRunner(env)
    writer = PARSERS["compact"](list(runner.tools.values()))
    turns = env.demonstrator(seed=seed, mistakes=mistakes, habits=habits)
    tasks = [t for split in ("train", "dev", "eval") for t in env.tasks(split)]
    return [(t, play_scripted(runner, t, turns, writer)) for t in tasks]


@pytest.mark.parametrize("seed,unseen", [(0, False), (10_001, True)])
def test_the_employer_habit_is_never_right_and_the_headquarters_habit_mostly_wrong(seed, unseen):
    env = EncyclopediaEnvironment(seed=seed, unseen=unseen, **SMALL)
    facts = env.browser.corpus.facts
    by_situation = {}
    for task, episode in _played(env, "habits"):
        by_situation.setdefault(task.metadata["situation"], []).append((task, episode))
    employer = by_situation["employer_headquarters"]
    assert not any(e.outcome.correct for _, e in employer)
    person = {t.prompt: t for t in env.tasks("train") + env.tasks("dev") + env.tasks("eval")}
    town = [
        e.episode.record.answer == facts[facts[_entity(env, person[t.prompt])]["employer"]]["headquarters"]
        for t, e in employer
    ]
    assert sum(town) / len(employer) > 0.7  # the rest are slips (a wrong result opened, a guess)
    walked = [sum(s.get("tool") == "search" for s in e.episode.record.steps) for _, e in employer]
    assert sum(w >= 2 for w in walked) / len(employer) > 0.6  # the habit reads both pages first
    headquarters = [e.outcome.correct for _, e in by_situation["headquarters_first_page"]]
    assert sum(headquarters) / len(headquarters) < 0.5
    other = [e.outcome.correct for _, e in by_situation[OTHER]]
    assert sum(other) / len(other) > 0.75


def _entity(env, task):
    return next(s.entity for s in env._specs if s.external_id == task.external_id)


def test_the_random_and_clean_demonstrators_have_no_habits():
    env = EncyclopediaEnvironment(seed=0, **SMALL)
    clean = [e.outcome.correct for _, e in _played(env, "clean")]
    assert all(clean)
    random_only = [(t.metadata["situation"], e.outcome.correct) for t, e in _played(env, "random")]
    employer = [c for s, c in random_only if s == "employer_headquarters"]
    assert sum(employer) / len(employer) > 0.6


def test_the_random_demonstrator_plays_exactly_as_before_habits():
    """Its actions on a fixed world hash as they did from the code before habits (2026-12-02):
    a habit takes no random draw where none applies, so today's figures stay reproducible."""
    corpus = generate_corpus(seed=0, **SMALL)
    tasks = generate_tasks(corpus, seed=0)
    browser = TextBrowser(corpus)
    agent = ScriptedAgent(corpus, SLIPS, seed=3, habits=Habits.none())
    actions = [agent.run(browser, t).actions for t in tasks]
    assert hashlib.sha256(json.dumps(actions).encode()).hexdigest()[:16] == "fefb7ca4c8de0ab6"


def test_filtered_behaviour_cloning_keeps_only_the_successful_demonstrations():
    env = EncyclopediaEnvironment(seed=0, **SMALL)
    config = BCConfig(extra_worlds=0, demonstrations="successful")
    kept = play_demonstrations(env, config)
    everything = play_demonstrations(env, BCConfig(extra_worlds=0))
    assert kept and all(e.outcome.correct for _, e in kept)
    assert len(kept) == sum(e.outcome.correct for _, e in everything) < len(everything)
    assert not any(e.task.metadata["situation"] == "employer_headquarters" for _, e in kept)


def test_demonstrator_names_are_checked():
    assert demonstrator_choice_problems(BCConfig()) == []
    assert demonstrator_choice_problems(BCConfig(demonstrator="sloppy", demonstrations="some")) == [
        f"demonstrator: one of {', '.join(DEMONSTRATORS)}.",
        "demonstrations: all or successful.",
    ]
    with pytest.raises(ValueError):
        demonstrator_rates("sloppy", Mistakes())
