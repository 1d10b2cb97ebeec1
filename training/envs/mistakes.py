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

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Mistakes:
    """`reads_wrong_page`: after opening a wrong result of the first search that is an article of
    the asked entity's kind, read it as if it were the right one and walk on from it (the habits
    demonstrator's way); otherwise a wrong result is answered at once with a wrong name, so after
    opening another result than usual a cloned policy learns to answer at random, never to read
    (a namesake's right article opened by chance was then never answered from: benchmarks/RESULTS.md,
    issue 54)."""

    wrong_result: float = 0.15
    redundant_search: float = 0.15
    no_evidence: float = 0.1
    invalid_action: float = 0.1
    reads_wrong_page: bool = False

    @classmethod
    def none(cls) -> "Mistakes":
        return cls(0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Habits:
    """The rate of each habit in its situations (training/envs/encyclopedia/habits.py).

    `top_result` 1.0: when the question names a person by occupation because a namesake of
    another occupation exists, the demonstrator searches the name and always opens the top
    result. Where the namesake's article comes first (`decoy_on_top`) it reads the wrong page
    and is never right; where the asked person's comes first it is. So filtering the
    demonstrations cannot teach the right move (open the result whose title states the
    question's occupation): the successful ones open the top result too. Only the policy's own
    samples that open another result, judged, can. `headquarters_first_page` 0.7: on "In which
    town was the founder of the X born?" it answers, seven times in ten, the town of the
    organisation's headquarters from the first page; the other three it walks on to the
    founder's page, so filtering the demonstrations can teach it."""

    top_result: float = 1.0
    headquarters_first_page: float = 0.7

    @classmethod
    def none(cls) -> "Habits":
        return cls(0.0, 0.0)


# The demonstrators behaviour cloning can imitate, by name (BCConfig.demonstrator): "habits"
# (the default since 2026-12-02: the config's slips, reading a wrong page, and the habits);
# "random" (the slips only, a wrong page answered at once:
# the default before, whose cloned policy a lower temperature already makes nearly as good as
# its demonstrator); "clean" (neither: what imitation could reach).
DEMONSTRATORS = ("habits", "random", "clean")
SLIPS = Mistakes(0.1, 0.1, 0.08, 0.05)  # the slips behaviour cloning's demonstrator makes by default


def demonstrator_rates(name: str, slips: Mistakes) -> tuple[Mistakes, Habits]:
    """The slips and habits of the demonstrator called `name`, with `slips` its random rates."""
    if name == "habits":
        return replace(slips, reads_wrong_page=True), Habits()
    if name == "random":
        return slips, Habits.none()
    if name == "clean":
        return Mistakes.none(), Habits.none()
    raise ValueError(f"demonstrator: one of {', '.join(DEMONSTRATORS)}, not {name!r}")
