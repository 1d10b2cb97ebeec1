"""A stored evaluation whose tasks name habit situations, for the behaviour panel's tests (the
selectors, the pages, the API and the browser test build it alike).

The start (a behaviour-cloned policy with the habits) opens the namesake's article on every
`decoy_on_top` task. The result (filtered behaviour cloning) opens the asked person's on most
of them. `headquarters_first_page` tasks: both right on the
same steps. Two tasks name only a question type (`birthplace`), as tasks stored before
situations existed do. The start is also played at its best temperature on dev (T=0.5).

Sampled, two episodes per task (per-task outcomes, start / result):
  employer 0..3     start [0,0] [0,0] [0,0] [0,0]    result [1,0] [1,1] [0,0] [1,1]
  headquarters 0..2 start [1,1] [1,1] [1,1]          result [1,1] [1,1] [1,1]
  birthplace 0..1   start [1,0] [0,0]                result [1,1] [0,0]
Greedy, one episode: employer start 0 0 0 0, result 1 1 0 1; headquarters 1 1 1 both;
birthplace start 1 0, result 1 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from annotate.models import Policy, Task
from tests.factories import PolicyFactory, TaskFactory, TrajectoryFactory
from training.envs.encyclopedia.habits import HABIT_NOTES
from training.models import Evaluation, EvaluationEntry, EvaluationEpisode

EMPLOYER_START = ([0, 0], [0, 0], [0, 0], [0, 0])
EMPLOYER_RESULT = ([1, 0], [1, 1], [0, 0], [1, 1])
EMPLOYER_GREEDY_RESULT = (1, 1, 0, 1)
BIRTHPLACE_START = ([1, 0], [0, 0])
BIRTHPLACE_RESULT = ([1, 1], [0, 0])


def one_hop_early(name: str) -> list[dict]:
    """The habit: the employer named on the person's page, answered."""
    return [
        {"kind": "action", "tool": "search", "arguments": {"query": name}},
        {"kind": "observation", "tool": "search", "content": f"[0] {name}"},
        {"kind": "action", "tool": "open", "arguments": {"index": 0}},
        {"kind": "observation", "tool": "open", "content": f"{name} worked for Acme Glassworks."},
        {"kind": "answer", "text": "Acme Glassworks", "quotes": []},
    ]


def two_hops(name: str) -> list[dict]:
    """The right move: on to the employer's page, then its founder."""
    return [
        *one_hop_early(name)[:4],
        {"kind": "action", "tool": "search", "arguments": {"query": "Acme Glassworks"}},
        {"kind": "observation", "tool": "search", "content": "[0] Acme Glassworks"},
        {"kind": "answer", "text": "Ida Founder", "quotes": []},
    ]


@dataclass
class Stored:
    evaluation: Evaluation
    start: EvaluationEntry
    result: EvaluationEntry
    best_t: EvaluationEntry
    tasks: dict[str, list[Task]] = field(default_factory=dict)

    def url(self, suffix: str = "") -> str:
        return f"/training/evaluations/{self.evaluation.pk}/{suffix}"


_TRAJECTORIES: dict = {}  # one row per (policy, task, steps): a trajectory is stored once (its content hash)


def _episode(entry, task, mode, sample, correct, steps):
    key = (entry.policy_id, task.pk, repr(steps))
    if key not in _TRAJECTORIES:
        _TRAJECTORIES[key] = TrajectoryFactory(
            task=task, policy=entry.policy, steps=steps, outcome={"correct": bool(correct)}
        )
    trajectory = _TRAJECTORIES[key]
    EvaluationEpisode.objects.create(
        entry=entry, task=task, trajectory=trajectory, mode=mode, sample=sample, correct=bool(correct)
    )


def _play(entry, task, sampled, greedy, steps_of):
    for sample, correct in enumerate(sampled):
        _episode(entry, task, "sampled", sample, correct, steps_of(correct, sample))
    if greedy is not None:
        _episode(entry, task, "greedy", 0, greedy, steps_of(greedy, 0))


def _policies() -> tuple[Policy, Policy]:
    start = PolicyFactory(
        name="bc-habits", version="1", metadata={"bc": {"steps": 10}, "config": {"demonstrator": "habits"}}
    )
    filtered = PolicyFactory(
        name="bc-filtered",
        version="1",
        metadata={"bc": {"steps": 10}, "config": {"demonstrator": "habits", "demonstrations": "successful"}},
    )
    return start, filtered


def stored_evaluation() -> Stored:
    _TRAJECTORIES.clear()
    start_policy, filtered = _policies()
    evaluation = Evaluation.objects.create(
        name="habits before/after",
        split="eval",
        reference_policy=start_policy,
        config={
            "environment": "encyclopedia-unseen",
            "split": "eval",
            "tasks": 9,
            "samples": 2,
            "temperature": 1.0,
            "greedy": True,
            "best_of_n": [],
            "seed": 0,
            "best_temperature": {"chosen": 0.5, "chosen_on": "dev"},
        },
    )
    entries = [
        EvaluationEntry.objects.create(
            evaluation=evaluation, label=label, policy=policy, is_baseline=position == 0, position=position
        )
        for position, (label, policy) in enumerate(
            (
                ("bc-habits@1 (start)", start_policy),
                ("bc-filtered@1", filtered),
                ("bc-habits@1 (start) at T=0.5, best on dev", start_policy),
            )
        )
    ]
    start, result, best_t = entries
    stored = Stored(evaluation, start, result, best_t)
    employer = [
        TaskFactory(
            prompt=f"Who founded the organisation Person {i} worked for?",
            metadata={
                "situation": "decoy_on_top",
                "habit": HABIT_NOTES["decoy_on_top"],
                "qtype": "person_employer_founder",
            },
        )
        for i in range(4)
    ]
    headquarters = [
        TaskFactory(
            prompt=f"In which town was the founder of the Firm {i} born?",
            metadata={
                "situation": "headquarters_first_page",
                "habit": HABIT_NOTES["headquarters_first_page"],
                "qtype": "org_founder_birthplace",
            },
        )
        for i in range(3)
    ]
    birthplace = [TaskFactory(prompt=f"Where was Person {i} born?", metadata={"qtype": "birthplace"}) for i in range(2)]
    stored.tasks = {
        "decoy_on_top": employer,
        "headquarters_first_page": headquarters,
        "birthplace": birthplace,
    }

    def steps_of(task):
        name = task.prompt.split("organisation ")[-1].split(" worked")[0]
        return lambda correct, sample: (two_hops if correct else one_hop_early)(name)

    for i, task in enumerate(employer):
        _play(start, task, EMPLOYER_START[i], 0, steps_of(task))
        _play(result, task, EMPLOYER_RESULT[i], EMPLOYER_GREEDY_RESULT[i], steps_of(task))
        _play(best_t, task, EMPLOYER_START[i], None, steps_of(task))
    for task in headquarters:
        for entry in (start, result, best_t):
            _play(entry, task, [1, 1], None if entry is best_t else 1, steps_of(task))
    for i, task in enumerate(birthplace):
        _play(start, task, BIRTHPLACE_START[i], BIRTHPLACE_START[i][0], steps_of(task))
        _play(result, task, BIRTHPLACE_RESULT[i], BIRTHPLACE_RESULT[i][0], steps_of(task))
        _play(best_t, task, BIRTHPLACE_RESULT[i], None, steps_of(task))
    return stored
