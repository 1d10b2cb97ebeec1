"""The demonstrator's habits and the situations they belong to.

A habit is the same wrong move in one kind of situation. Here a situation is read from what
the agent sees, never from a name: the shape of the question the world generator asks in every
world (training/envs/encyclopedia/corpus.py), and for namesakes the occupation the question
states against the titles a search for the name returns. A new world makes the same situations
about other entities, so a policy can recognise them anywhere. `situation_of` is the one
reading of it: the demonstrator, the environment's task metadata, the evaluation's
per-situation figures and the behaviour panel all go through it.

| habit | situation | the habit | the right move |
|---|---|---|---|
| `top_result` | the question names a person with a namesake by occupation ("the composer Ilse Marrow"); a search for the name returns both articles, "Ilse Marrow (composer)" and "Ilse Marrow (weaver)", in an order the world decides | open the top result | open the result whose title states the question's occupation |
| `headquarters_first_page` | "In which town was the founder of the X born?" | answer the town of X's headquarters, from X's page (one hop early) | search the founder, open their page, answer their birthplace |

`top_result` is harmless where the asked person comes first (`namesake_on_top`) and never
right where the namesake does (`decoy_on_top`).
"""

from __future__ import annotations

import re

from training.envs.encyclopedia.corpus import OCCUPATIONS

NAMESAKE = re.compile(rf"\bthe ({'|'.join(OCCUPATIONS)}) (?=[A-Z])")
HEADQUARTERS = re.compile(r"^In which town was the founder of the .+ born\?$")
OTHER = "other"

# Each situation, and the habit of the demonstrator that acts in it (None: no habit).
SITUATIONS = {
    "decoy_on_top": "top_result",
    "namesake_on_top": "top_result",
    "headquarters_first_page": "headquarters_first_page",
}
HABIT_NOTES = {
    "decoy_on_top": "opens the top result, the namesake's article, and answers from it",
    "namesake_on_top": "opens the top result (here the right article: the habit is harmless)",
    "headquarters_first_page": "stops one hop early: answers the headquarters town, not the founder's birthplace",
}


def asked_occupation(question: str) -> str | None:
    """The occupation a question names its person by ("the composer Ilse Marrow"), if any."""
    match = NAMESAKE.search(question)
    return match.group(1) if match else None


def situation_of(question: str, top_title: str | None = None) -> str:
    """The situation a question is in (a key of SITUATIONS, or OTHER). `top_title`: the title of
    the top result a search for the asked person's name returns, which tells a namesake question's
    two situations apart (without it a namesake question is `namesake_on_top`'s habit only by
    shape: the demonstrator's use)."""
    text = question.strip()
    occupation = asked_occupation(text)
    if occupation:
        on_top = top_title is None or top_title.endswith(f"({occupation})")
        return "namesake_on_top" if on_top else "decoy_on_top"
    if HEADQUARTERS.match(text):
        return "headquarters_first_page"
    return OTHER


def habit_of(situation: str) -> str | None:
    """The habit that acts in a situation, if any."""
    return SITUATIONS.get(situation)
