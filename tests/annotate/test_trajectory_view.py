"""The comparison screen's alignment of two trajectories, in plain Python (no database)."""

import time

from annotate.trajectory_view import (
    ALIGN_MAX_CELLS,
    FOLD_MIN,
    align_steps,
    pair_view,
    step_key,
)
from tests.helpers import DETOUR, REJOIN, START, answer, call, seen, thought


def pairs(view):
    return [(row.left.index if row.left else None, row.right.index if row.right else None) for row in view.rows]


def test_a_detour_on_one_side_leaves_gaps_and_the_rows_match_again_after_it():
    left, right = START + REJOIN, START + DETOUR + REJOIN
    view = pair_view(left, right)
    assert pairs(view) == [(0, 0), (1, 1), (2, 2), (None, 3), (None, 4), (3, 5), (4, 6), (5, 7)]
    assert [row.status for row in view.rows] == ["same"] * 3 + ["right-only"] * 2 + ["same"] * 3
    assert view.first_difference == 3 and view.rows[3].first_difference
    assert sum(row.first_difference for row in view.rows) == 1
    assert (view.left_steps, view.right_steps, view.align, view.note) == (6, 8, "content", "")


def test_by_index_the_same_pair_stays_shifted_after_the_detour():
    view = pair_view(START + REJOIN, START + DETOUR + REJOIN, align="index")
    assert pairs(view) == [(i, i) for i in range(6)] + [(None, 6), (None, 7)]
    assert view.align == "index" and view.first_difference == 3
    assert not any(row.same for row in view.rows[3:])


def test_paths_that_diverge_side_by_side_and_rejoin():
    """Changed steps of the same kind share a row; a different number of them leaves gaps."""
    left = START + [thought("Open the first hit."), call("open", url="a"), seen("open", "page a")] + REJOIN
    right = START + [thought("Search again."), call("search", query="x")] + REJOIN
    view = pair_view(left, right)
    assert pairs(view) == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, None), (6, 5), (7, 6), (8, 7)]
    assert [row.status for row in view.rows[3:6]] == ["changed", "changed", "left-only"]
    assert view.first_difference == 3


def test_steps_of_different_kinds_never_share_a_row():
    view = pair_view([thought("a"), answer("x")], [call("search", query="q"), answer("x")])
    assert pairs(view) == [(0, None), (None, 0), (1, 1)]
    assert view.rows[2].same and view.first_difference == 0


def test_keys_ignore_argument_order_case_and_spacing_but_not_the_arguments():
    assert step_key({"kind": "action", "tool": "open", "arguments": {"a": 1, "b": 2}}) == step_key(
        {"kind": "action", "tool": "open", "arguments": {"b": 2, "a": 1}}
    )
    assert step_key(thought("Find  the\nFounder.")) == step_key(thought("find the founder."))
    assert step_key(call("open", url="a")) != step_key(call("open", url="b"))
    assert step_key(seen("open", "x")) != step_key({**seen("open", "x"), "is_error": True})
    view = pair_view([thought("Find  the\nFounder."), answer("X")], [thought("find the founder."), answer("x")])
    assert view.first_difference is None and all(row.same for row in view.rows)


def test_identical_trajectories_have_no_first_difference_and_fold_into_one_run():
    steps = START + REJOIN
    view = pair_view(steps, [dict(s) for s in steps])
    assert view.first_difference is None and view.identical_rows == len(steps)
    assert len(view.blocks) == 1 and view.blocks[0].folded and len(view.blocks[0].rows) == len(steps)


def test_runs_of_identical_rows_fold_only_from_fold_min():
    left, right = START + REJOIN, START + DETOUR + REJOIN
    blocks = pair_view(left, right).blocks
    assert FOLD_MIN == 3
    assert [(b.folded, len(b.rows)) for b in blocks] == [(True, 3), (False, 2), (True, 3)]
    short = pair_view([thought("a"), thought("b"), answer("x")], [thought("a"), thought("c"), answer("x")]).blocks
    assert [(b.folded, len(b.rows)) for b in short] == [(False, 3)]


def test_the_step_index_stays_each_sides_own():
    view = pair_view(START + REJOIN, START + DETOUR + REJOIN)
    row = next(r for r in view.rows if r.left and r.left.index == 3)
    assert row.index == 5 and row.right.index == 5
    row = next(r for r in view.rows if r.left and r.left.index == 5)
    assert (row.index, row.right.index) == (7, 7)


def test_one_empty_side():
    view = pair_view([], START)
    assert pairs(view) == [(None, 0), (None, 1), (None, 2)] and view.first_difference == 0
    assert pair_view([], []).rows == [] and pair_view([], []).first_difference is None


def test_over_the_bound_it_falls_back_to_index_alignment_with_a_note():
    side = int(ALIGN_MAX_CELLS**0.5)
    left = [thought(f"left {i}") for i in range(side + 1)]
    right = [thought(f"right {i}") for i in range(side + 1)]
    view = pair_view(left, right)
    assert view.align == "index" and "too long to align by content" in view.note
    assert pairs(view) == [(i, i) for i in range(side + 1)]
    # A common start and end do not count against the bound: only the middle is aligned.
    assert align_steps([step_key(s) for s in START * 400], [step_key(s) for s in START * 400]) is not None
    assert pair_view(left, right, max_cells=4).note and not pair_view(left[:2], right[:2], max_cells=4).note


def test_the_largest_alignment_takes_well_under_a_second():
    """500 x 500 steps (TRAJECTORY_MAX_STEPS) with nothing in common: the worst case under the bound."""
    left = [[thought(f"a{i}"), call("search", q=f"x{i}"), seen("search", f"r{i}")][i % 3] for i in range(500)]
    right = [[thought(f"b{i}"), call("open", q=f"y{i}"), seen("open", f"s{i}")][i % 3] for i in range(500)]
    started = time.perf_counter()
    view = pair_view(left, right)
    assert view.align == "content" and time.perf_counter() - started < 2.0
    assert pairs(view) == [(i, i) for i in range(500)]  # same kinds pair up: no gaps needed
