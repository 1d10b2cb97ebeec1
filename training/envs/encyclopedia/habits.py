"""The demonstrator's habits and the situations they belong to.

A habit is the same wrong move in one kind of situation. Here a situation is a shape of
question the world generator asks in every world (training/envs/encyclopedia/corpus.py), told
apart by its words, never by a name: a new world asks the same shapes about other entities, so
a policy can recognise the situation anywhere. `situation_of` reads it from the question text
alone; the demonstrator, the evaluation's per-situation figures and the behaviour panel all
call it.

| habit | situation (question shape) | the habit | the right move |
|---|---|---|---|
| `employer_headquarters` | "Who founded the organisation X worked for?" | walk both hops right, then answer the town of the employer's headquarters from its page (the last name on it) | answer the founder that page names |
| `headquarters_first_page` | "In which town was the founder of the X born?" | answer the town of X's headquarters, from X's page (one hop early) | search the founder, open their page, answer their birthplace |
"""

from __future__ import annotations

import re

# Situation name -> the question's shape. Each habit of `Habits` has the situation of its name.
SITUATIONS: dict[str, re.Pattern] = {
    "employer_headquarters": re.compile(r"^Who founded the organisation .+ worked for\?$"),
    "headquarters_first_page": re.compile(r"^In which town was the founder of the .+ born\?$"),
}
OTHER = "other"

HABIT_NOTES = {
    "employer_headquarters": "reads the employer's page, then answers its headquarters town, not its founder",
    "headquarters_first_page": "stops one hop early: answers the headquarters town, not the founder's birthplace",
}


def situation_of(question: str) -> str:
    """The habit situation a question is in (a key of SITUATIONS), or OTHER."""
    text = question.strip()
    return next((name for name, shape in SITUATIONS.items() if shape.match(text)), OTHER)
