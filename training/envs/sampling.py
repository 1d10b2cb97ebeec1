"""Taking some of a split's tasks without leaving a kind out.

A world's tasks are in a fixed order (by id), and ids group a kind of question together, so
the first N tasks of a split can all be of one or two kinds: "the first 300 tasks" of an
encyclopedia never held one of its five kinds of question (27% of every world). `spread`
orders the tasks so that every prefix takes each kind in proportion to its share.
"""

from __future__ import annotations

from collections import defaultdict


def spread(tasks: list, *, key: str = "qtype") -> list:
    """The tasks reordered so that each prefix holds every kind (`task.metadata[key]`) in
    proportion: task i of a kind of n sits at (i + 0.5) / n, ties in the kinds' first-seen
    order. Deterministic; within a kind the order is kept; tasks without the key are one kind."""
    kinds: dict[object, list] = defaultdict(list)
    for task in tasks:
        kinds[(task.metadata or {}).get(key)].append(task)
    placed = [
        ((i + 0.5) / len(members), rank, task)
        for rank, members in enumerate(kinds.values())
        for i, task in enumerate(members)
    ]
    placed.sort(key=lambda item: (item[0], item[1]))
    return [task for _, _, task in placed]


def spread_prefix(tasks: list, limit: int, *, key: str = "qtype") -> list:
    """The first `limit` tasks of `spread` (every task when `limit` is 0 or above their count)."""
    return spread(tasks, key=key)[:limit] if 0 < limit < len(tasks) else list(tasks)
