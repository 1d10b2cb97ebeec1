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


def test_a_situation_is_read_from_what_the_agent_sees_not_from_names():
    """Every task keeps its situation when the entity it asks about is renamed to a name no world
    has: the cue is the shape of the question (and, for namesakes, the occupation it states
    against the titles a search returns), present wherever that shape is asked."""
    for env in (EncyclopediaEnvironment(seed=0, **SMALL), EncyclopediaEnvironment(seed=10_002, unseen=True, **SMALL)):
        for spec in env._specs:
            name = spec.entity.split(" (")[0]
            renamed = spec.question.replace(name.split(" ")[0], "Qqzx")
            assert renamed != spec.question
            top = env.browser.index.search(name, 1)[0].title.replace(name.split(" ")[0], "Qqzx")
            situation = env._situations[spec.external_id]
            assert situation_of(renamed, top) == situation
            assert (situation == "headquarters_first_page") == (spec.qtype == "org_founder_birthplace")
    assert situation_of("In which town was the weaver Qqzx Vvyw born?", "Qqzx Vvyw (composer)") == "decoy_on_top"
    assert situation_of("In which town was the weaver Qqzx Vvyw born?", "Qqzx Vvyw (weaver)") == "namesake_on_top"
    assert situation_of("In which town was Qqzx Vvyw born?") == OTHER


def test_worlds_without_namesakes_are_the_worlds_before_them():
    before = generate_corpus(seed=0, namesakes=0.0, **SMALL)
    assert not any("(" in d.title for d in before.documents)
    with_them = generate_corpus(seed=0, **SMALL)
    twins = [t for t, f in with_them.facts.items() if f.get("decoy")]
    assert twins and len(with_them.documents) == len(before.documents) + len(twins)
    # the rest of the world is drawn as it was: the same places and organisations, word for word
    kept = {d.title: d.text for d in before.documents if d.kind != "person"}
    assert kept == {d.title: d.text for d in with_them.documents if d.kind != "person"}


def _played(env, name: str, seed: int = 0):
    mistakes, habits = demonstrator_rates(name, SLIPS)
    runner = EpisodeRunner(env)
    writer = PARSERS["compact"](list(runner.tools.values()))
    turns = env.demonstrator(seed=seed, mistakes=mistakes, habits=habits)
    tasks = [t for split in ("train", "dev", "eval") for t in env.tasks(split)]
    return [(t, play_scripted(runner, t, turns, writer)) for t in tasks]


@pytest.mark.parametrize("seed,unseen", [(0, False), (10_001, True)])
def test_the_top_result_habit_is_never_right_where_the_namesake_is_on_top(seed, unseen):
    env = EncyclopediaEnvironment(seed=seed, unseen=unseen)
    by_situation = {}
    for task, episode in _played(env, "habits"):
        by_situation.setdefault(task.metadata["situation"], []).append(episode)
    decoy = by_situation["decoy_on_top"]
    assert len(decoy) >= 20 and not any(e.outcome.correct for e in decoy)
    # it read the namesake's page and walked on from it, as from the right one
    opened = [s.get("title", "") for e in decoy for s in e.episode.record.steps if s.get("tool") == "open"]
    assert opened
    right_on_top = [e.outcome.correct for e in by_situation["namesake_on_top"]]
    assert sum(right_on_top) / len(right_on_top) > 0.6
    headquarters = [e.outcome.correct for e in by_situation["headquarters_first_page"]]
    assert sum(headquarters) / len(headquarters) < 0.5
    other = [e.outcome.correct for e in by_situation[OTHER]]
    assert sum(other) / len(other) > 0.75


def test_the_random_and_clean_demonstrators_have_no_habits():
    env = EncyclopediaEnvironment(seed=0, **SMALL)
    clean = [e.outcome.correct for _, e in _played(env, "clean")]
    assert all(clean)
    random_only = [(t.metadata["situation"], e.outcome.correct) for t, e in _played(env, "random")]
    decoy = [c for s, c in random_only if s == "decoy_on_top"]
    assert decoy and sum(decoy) / len(decoy) > 0.6


def test_the_random_demonstrator_plays_exactly_as_before_habits():
    """Its actions on a world without namesakes hash as they did from the code before habits
    (2026-12-02): a habit takes no random draw where none applies, so the figures before habits
    stay reproducible (`namesakes=0` and the `random` demonstrator)."""
    corpus = generate_corpus(seed=0, namesakes=0.0, **SMALL)
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
