"""A scripted agent that solves encyclopedia tasks, with mistakes it makes on purpose.

It knows which articles hold the answer (the task's evidence) and walks them: search the
title, open the matching result, and on the last article quote the words that support
the answer and answer. Each mistake has its own probability, so demonstrations come in mixed
quality: opening the wrong result (and then answering from it), a redundant repeated
search, answering without evidence (a guess, no quote), and an invalid action. Those are
slips, random; the habits (training/envs/encyclopedia/habits.py) are systematic: in its
situation, at its rate, the agent opens the top result where a namesake may be it, or answers
an organisation's headquarters town one hop early.
"""

from __future__ import annotations

import random

from training.envs.encyclopedia.browser import Episode, TextBrowser
from training.envs.encyclopedia.corpus import Corpus, TaskSpec
from training.envs.encyclopedia.habits import habit_of, situation_of
from training.envs.mistakes import Habits, Mistakes


def _path_as_if(facts: dict, task: TaskSpec, title: str) -> tuple[list[str], str]:
    """(the evidence titles, the answer) the task would have if its entity were the one titled
    `title` (another article of its kind: the namesake's whose article the agent opened), read
    and walked on from."""
    entity = facts[title]
    if task.qtype == "person_birthplace":
        return [title], entity["born_in"]
    if task.qtype == "person_birthplace_river":
        return [title, entity["born_in"]], facts[entity["born_in"]]["river"]
    if task.qtype == "person_employer_founder":
        return [title, entity["employer"]], facts[entity["employer"]]["founder"]
    if task.qtype == "org_founder":
        return [title], entity["founder"]
    return [title, entity["founder"]], facts[entity["founder"]]["born_in"]  # org_founder_birthplace


def _answer_quote(text: str, answer: str) -> str | None:
    """The shortest quote that supports the answer: the word before it and the answer
    ("by Ilse Marrow", "in Kessa", "river Anse"), short enough for a small policy to copy."""
    core = answer[4:] if answer.lower().startswith("the ") else answer
    at = text.find(core)
    if at < 0:
        return None
    before = text[:at].rstrip().split(" ")
    return (before[-1] + " " + core) if before and before[-1] else core


def _wrong_answer(corpus: Corpus, task: TaskSpec, rng: random.Random) -> str:
    """A plausible wrong answer: another entity of the answer's kind."""
    kind = corpus.facts.get(task.answer, {}).get("kind")
    if kind is None and task.answer.lower().startswith("the "):
        rivers = sorted({f["river"] for f in corpus.facts.values() if f["kind"] == "place"} - {task.answer})
        return rng.choice(rivers)
    pool = sorted(t for t, f in corpus.facts.items() if f["kind"] == kind and t != task.answer)
    return rng.choice(pool) if pool else "unknown"


class ScriptedAgent:
    def __init__(self, corpus: Corpus, mistakes: Mistakes = Mistakes(), seed: int = 0, habits: Habits = Habits.none()):
        self.corpus, self.mistakes, self.habits, self.rng = corpus, mistakes, habits, random.Random(seed)

    def habit(self, task: TaskSpec) -> str | None:
        """The habit that takes this episode, if one does (no random draw where no habit applies,
        so a demonstrator without habits plays as before)."""
        habit = habit_of(situation_of(task.question))
        rate = getattr(self.habits, habit, 0.0) if habit else 0.0
        if rate <= 0 or self.rng.random() >= rate:
            return None
        return habit

    def actions(self, browser: TextBrowser, episode: Episode, task: TaskSpec):
        """Generate actions one at a time; the caller steps the browser with each."""
        m, rng = self.mistakes, self.rng
        if rng.random() < m.invalid_action:
            yield f"look up {task.evidence[0]}"
        habit = self.habit(task)
        if rng.random() < m.no_evidence:  # a guess; never the right one where a habit has the episode
            yield f"search[{self._query(task.evidence[0])}]"
            yield f"answer[{_wrong_answer(self.corpus, task, rng) if habit or rng.random() < 0.7 else task.answer}]"
            return
        evidence, answer = list(task.evidence), task.answer
        for hop in range(len(evidence)):
            title = evidence[hop]
            query = self._query(title)
            yield f"search[{query}]"
            if rng.random() < m.redundant_search:
                yield f"search[{query}]"
            results = episode.results
            index = next((i for i, d in enumerate(results) if d.title == title), 0)
            opened = 0 if habit == "top_result" and hop == 0 else index
            if rng.random() < m.wrong_result and len(results) > 1:
                opened = rng.choice([i for i in range(len(results)) if i != index])
                if not (m.reads_wrong_page and hop == 0 and self._like(task, results[opened].title)):
                    yield f"open[{opened}]"
                    yield f"answer[{_wrong_answer(self.corpus, task, rng)}]"
                    return
            yield f"open[{opened}]"
            page = episode.page
            if page is not None and page.title != title and self._like(task, page.title):
                # another article of the asked entity's kind (a namesake's, a slip's): read as if it
                # were the right one, and walked on from
                evidence, answer = _path_as_if(self.corpus.facts, task, page.title)
            if habit == "headquarters_first_page":
                answer = self.corpus.facts[evidence[0]]["headquarters"]
            if hop == len(evidence) - 1 or habit == "headquarters_first_page":
                quote = _answer_quote(page.text if page else "", answer)
                if quote:
                    yield f"quote[{quote}]"
                yield f"answer[{answer}]"
                return

    def _like(self, task: TaskSpec, title: str) -> bool:
        """Whether `title` is an article of the same kind as the task's first one (a person for a
        question about a person), so that it can be read as if it were that one."""
        facts = self.corpus.facts
        return title in facts and facts[title]["kind"] == facts.get(task.entity, {}).get("kind")

    def _query(self, title: str) -> str:
        """What the agent searches for an article: its title, or for a namesake's "Name
        (occupation)" the name, as the question writes it."""
        return self.corpus.facts.get(title, {}).get("name", title) if "(" in title else title

    def run(self, browser: TextBrowser, task: TaskSpec) -> Episode:
        episode = browser.reset(task.question)
        for action in self.actions(browser, episode, task):
            if episode.done:
                break
            browser.step(episode, action)
        return episode
