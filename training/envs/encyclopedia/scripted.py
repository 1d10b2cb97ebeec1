"""A scripted agent that solves encyclopedia tasks, with mistakes it makes on purpose.

It knows which articles hold the answer (the task's evidence) and walks them: search the
title, open the matching result, and on the last article quote the words that support
the answer and answer. Each mistake has its own probability, so demonstrations come in mixed
quality: opening the wrong result (and then answering from it), a redundant repeated
search, answering without evidence (a guess, no quote), and an invalid action. Those are
slips, random; the habits (training/envs/encyclopedia/habits.py) are systematic: in its
situation, at its rate, the agent answers an organisation page's headquarters town, after
reading the right page or one hop early.
"""

from __future__ import annotations

import random

from training.envs.encyclopedia.browser import Episode, TextBrowser
from training.envs.encyclopedia.corpus import Corpus, TaskSpec
from training.envs.encyclopedia.habits import situation_of
from training.envs.mistakes import Habits, Mistakes

# Habit -> (whether it answers on the first page, one hop early, the wrong answer from the facts
# and the task's entity). Both answer an organisation page's headquarters town: after reading the
# employer's page (`employer_headquarters`), or instead of walking on to the founder's page.
_HABITS = {
    "employer_headquarters": (False, lambda facts, entity: facts[facts[entity]["employer"]]["headquarters"]),
    "headquarters_first_page": (True, lambda facts, entity: facts[entity]["headquarters"]),
}


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

    def habit(self, task: TaskSpec) -> tuple[bool, str] | None:
        """(whether it answers on the first page, its wrong answer) when a habit takes this episode
        (no random draw where no habit applies, so a demonstrator without habits plays as before)."""
        habit = situation_of(task.question)
        rate = getattr(self.habits, habit, 0.0)
        if rate <= 0 or self.rng.random() >= rate:
            return None
        first_page, wrong = _HABITS[habit]
        return first_page, wrong(self.corpus.facts, task.entity)

    def actions(self, browser: TextBrowser, episode: Episode, task: TaskSpec):
        """Generate actions one at a time; the caller steps the browser with each."""
        m, rng = self.mistakes, self.rng
        if rng.random() < m.invalid_action:
            yield f"look up {task.evidence[0]}"
        habit = self.habit(task)
        stop_early, answer = habit or (False, task.answer)
        if rng.random() < m.no_evidence:  # a guess: a habit's own answer where one has taken the episode
            yield f"search[{task.evidence[0]}]"
            guess = _wrong_answer(self.corpus, task, rng) if rng.random() < 0.7 else task.answer
            yield f"answer[{answer if habit else guess}]"
            return
        for hop, title in enumerate(task.evidence):
            query = title
            yield f"search[{query}]"
            if rng.random() < m.redundant_search:
                yield f"search[{query}]"
            results = getattr(episode, "_results", [])
            index = next((i for i, d in enumerate(results) if d.title == title), 0)
            if rng.random() < m.wrong_result and len(results) > 1:
                wrong = rng.choice([i for i in range(len(results)) if i != index])
                yield f"open[{wrong}]"
                yield f"answer[{_wrong_answer(self.corpus, task, rng)}]"
                return
            yield f"open[{index}]"
            if hop == len(task.evidence) - 1 or stop_early:
                page = episode._page.text if getattr(episode, "_page", None) else ""
                quote = _answer_quote(page, answer)
                if quote:
                    yield f"quote[{quote}]"
                yield f"answer[{answer}]"
                return

    def run(self, browser: TextBrowser, task: TaskSpec) -> Episode:
        episode = browser.reset(task.question)
        for action in self.actions(browser, episode, task):
            if episode.done:
                break
            browser.step(episode, action)
        return episode
