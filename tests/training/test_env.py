"""The environment on hand-made episodes, the generator, the rubric and the scripted agent."""

import json

import pytest

from training.envs.answers import normalize, token_f1
from training.envs.encyclopedia.browser import BrowserConfig, TextBrowser
from training.envs.encyclopedia.corpus import (
    Corpus,
    CorpusFileError,
    Document,
    generate_corpus,
    generate_tasks,
    load_corpus_jsonl,
    load_tasks_jsonl,
)
from training.envs.encyclopedia.rubric import score_episode
from training.envs.encyclopedia.scripted import ScriptedAgent
from training.envs.mistakes import Mistakes


@pytest.fixture(scope="module")
def world():
    corpus = generate_corpus(seed=0, n_places=20, n_people=40, n_orgs=15)
    return corpus, generate_tasks(corpus, seed=0), TextBrowser(corpus)


def tiny_corpus():
    return Corpus(
        documents=[
            Document(
                "1",
                "Veloran Glassworks",
                "The Veloran Glassworks was founded in 1822 by Ilse Marrow. It makes lenses.",
                "org",
            ),
            Document("2", "Ilse Marrow", "Ilse Marrow was a glassmaker born in Kessa.", "person"),
            Document("3", "Kessa", "Kessa is a port on the river Anse.", "place"),
        ]
    )


def test_generator_is_deterministic_for_a_seed_and_differs_across_seeds():
    a, b = generate_corpus(seed=3), generate_corpus(seed=3)
    assert [(d.title, d.text) for d in a.documents] == [(d.title, d.text) for d in b.documents]
    assert [t.__dict__ for t in generate_tasks(a, seed=3)] == [t.__dict__ for t in generate_tasks(b, seed=3)]
    assert [d.title for d in generate_corpus(seed=4).documents] != [d.title for d in a.documents]


def test_tasks_have_known_answers_in_their_evidence_and_splits_by_entity(world):
    corpus, tasks, _ = world
    titles = corpus.by_title()
    assert {t.hops for t in tasks} == {1, 2}
    for t in tasks:
        core = t.answer[4:] if t.answer.startswith("the ") else t.answer
        assert core in titles[t.evidence[-1]].text
    by_entity = {}
    for t in tasks:
        by_entity.setdefault(t.entity, set()).add(t.split)
    assert all(len(splits) == 1 for splits in by_entity.values())
    assert {t.split for t in tasks} == {"train", "dev", "eval"}


def test_search_open_quote_answer_on_a_hand_made_episode():
    browser = TextBrowser(tiny_corpus())
    ep = browser.reset("Who founded the Veloran Glassworks?")
    obs = browser.step(ep, "search[Veloran Glassworks founder]").observation
    assert obs.startswith("[0] Veloran Glassworks")
    assert "founded in 1822" in browser.step(ep, "open[0]").observation
    assert browser.step(ep, "find[Marrow]").observation.startswith("The Veloran Glassworks was founded")
    assert browser.step(ep, "quote[founded in 1822 by Ilse Marrow]").observation == "Quote saved."
    assert browser.step(ep, "quote[founded by Orvin Tesk]").error  # not in the open page
    result = browser.step(ep, "answer[Ilse Marrow]")
    assert result.done and ep.answer == "Ilse Marrow"
    outcome = score_episode(ep, "Ilse Marrow")
    assert outcome.correct and outcome.quote_support and outcome.tool_errors == 1 and outcome.steps == 6
    assert outcome.utility == 10 - 6 - 5
    assert [s["kind"] for s in ep.steps][-1] == "answer" and ep.steps[-1]["quotes"] == [
        "founded in 1822 by Ilse Marrow"
    ]


@pytest.mark.parametrize("action", ["hello", "search(Veloran)", "open[x]", "open[7]", "quote[anything]", "search[]"])
def test_malformed_actions_are_error_observations_that_use_a_step(action):
    browser = TextBrowser(tiny_corpus())
    ep = browser.reset("q")
    result = browser.step(ep, action)
    assert result.error and result.observation.startswith("Error") and not result.done
    assert len(ep.actions) == 1 and ep.tool_errors == 1


def test_repeated_identical_actions_are_a_loop_and_end_the_episode():
    browser = TextBrowser(tiny_corpus(), BrowserConfig(loop_repeats=3))
    ep = browser.reset("q")
    assert not browser.step(ep, "search[Kessa]").done
    assert not browser.step(ep, "search[Kessa]").done
    assert browser.step(ep, "search[Kessa]").done and ep.loop
    outcome = score_episode(ep, "Ilse Marrow")
    assert outcome.loop and not outcome.correct and outcome.utility == -3 - 10


def test_step_limit_ends_runaway_episodes():
    browser = TextBrowser(tiny_corpus(), BrowserConfig(max_steps=4))
    ep = browser.reset("q")
    for i, q in enumerate(["a", "b", "c", "d"]):
        result = browser.step(ep, f"search[{q}]")
    assert result.done and ep.truncated and ep.answer is None


def test_quote_support_needs_the_answer_in_a_quote_from_an_opened_page():
    browser = TextBrowser(tiny_corpus())
    ep = browser.reset("q")
    browser.step(ep, "search[Kessa river]")
    browser.step(ep, "open[0]")
    browser.step(ep, "quote[Kessa is a port]")
    browser.step(ep, "answer[the Anse]")
    outcome = score_episode(ep, "the Anse")
    assert outcome.correct and not outcome.quote_support  # the quote does not contain the answer


def test_normalized_exact_match_and_f1():
    assert normalize("The  Anse!") == "anse"
    assert token_f1("Ilse Marrow", "Marrow") == pytest.approx(2 / 3)
    assert token_f1("", "x") == 0.0


def test_scripted_agent_without_mistakes_solves_every_task(world):
    corpus, tasks, browser = world
    agent = ScriptedAgent(corpus, Mistakes.none())
    outcomes = [score_episode(agent.run(browser, t), t.answer) for t in tasks]
    assert all(o.correct and o.quote_support and o.tool_errors == 0 for o in outcomes)


def test_scripted_agent_with_mistakes_gives_mixed_quality(world):
    corpus, tasks, browser = world
    agent = ScriptedAgent(
        corpus, Mistakes(wrong_result=0.3, redundant_search=0.3, no_evidence=0.2, invalid_action=0.3), seed=5
    )
    outcomes = [score_episode(agent.run(browser, t), t.answer) for t in tasks]
    rate = sum(o.correct for o in outcomes) / len(outcomes)
    assert 0.3 < rate < 0.9
    assert any(o.tool_errors for o in outcomes) and len({o.steps for o in outcomes}) > 2


def test_user_corpus_and_questions_load_and_bad_lines_are_refused_with_numbers(tmp_path):
    good = tmp_path / "corpus.jsonl"
    good.write_text('{"title": "A", "text": "alpha"}\n{"title": "B", "text": "beta"}\n')
    assert [d.title for d in sorted(load_corpus_jsonl(good).documents, key=lambda d: d.title)] == ["A", "B"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "A", "text": "alpha"}\nnot json\n{"title": 3}\n{"title": "A", "text": "again"}\n')
    with pytest.raises(CorpusFileError) as info:
        load_corpus_jsonl(bad)
    assert [p.split(":")[0] for p in info.value.problems] == ["line 2", "line 3", "line 4"]
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "Who?", "answer": "Me", "split": "eval"}) + '\n{"question": 1}\n')
    with pytest.raises(CorpusFileError, match="line 2"):
        load_tasks_jsonl(questions)
