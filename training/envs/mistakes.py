"""What a scripted demonstrator gets wrong (the encyclopedia's agent takes both; another
environment's demonstrator may ignore them). Plain data, so a run's config can name them
without importing any environment.

Two kinds of wrong:

- **Slips** (`Mistakes`): random. Each happens anywhere at its rate, so the most likely action
  of a policy cloned on the demonstrations is still the right one, and a lower sampling
  temperature removes most of them for free.
- **Habits** (`Habits`): systematic. Each is the same wrong move in one kind of situation the
  world generator makes in every world (a question of one shape), at its rate there. A cloned
  policy copies a habit, and a lower temperature makes it worse: this is what feedback on the
  policy's own samples is for (docs/agent.md, "Habits").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mistakes:
    wrong_result: float = 0.15
    redundant_search: float = 0.15
    no_evidence: float = 0.1
    invalid_action: float = 0.1

    @classmethod
    def none(cls) -> "Mistakes":
        return cls(0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Habits:
    """The rate of each habit in its situation (training/envs/encyclopedia/habits.py).

    `employer_headquarters` 1.0: on "Who founded the organisation X worked for?" the demonstrator
    walks both hops right and then always answers the town of the employer's headquarters (the
    last name on its page), so the habit is never right in the demonstrations and the right move
    (answer the founder that page names) appears only in another kind of question ("Who founded
    the X?"): filtering the demonstrations cannot teach it. `headquarters_first_page` 0.7: on "In which town was the founder of the X
    born?" it answers, seven times in ten, the town of the organisation's headquarters from the
    first page; the other three it walks on to the founder's page, so filtering the
    demonstrations can teach it."""

    employer_headquarters: float = 1.0
    headquarters_first_page: float = 0.7

    @classmethod
    def none(cls) -> "Habits":
        return cls(0.0, 0.0)


# The demonstrators behaviour cloning can imitate, by name (BCConfig.demonstrator): "habits"
# (the default since 2026-12-02: the config's slips and the habits); "random" (the slips only:
# the default before, whose cloned policy a lower temperature already makes nearly as good as
# its demonstrator); "clean" (neither: what imitation could reach).
DEMONSTRATORS = ("habits", "random", "clean")
SLIPS = Mistakes(0.1, 0.1, 0.08, 0.05)  # the slips behaviour cloning's demonstrator makes by default


def demonstrator_rates(name: str, slips: Mistakes) -> tuple[Mistakes, Habits]:
    """The slips and habits of the demonstrator called `name`, with `slips` its random rates."""
    if name == "habits":
        return slips, Habits()
    if name == "random":
        return slips, Habits.none()
    if name == "clean":
        return Mistakes.none(), Habits.none()
    raise ValueError(f"demonstrator: one of {', '.join(DEMONSTRATORS)}, not {name!r}")
