"""pass@k's unbiased estimator (training/evaluation/pass_at_k.py) against values worked by hand
and against counting every draw of k samples."""

from __future__ import annotations

from itertools import combinations

import pytest

from training.evaluation.pass_at_k import pass_at_k


def test_known_values():
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 4) == 1.0 and pass_at_k(16, 3, 16) == 1.0  # k = n: right if any sample is
    assert pass_at_k(4, 0, 1) == 0.0 and pass_at_k(16, 0, 16) == 0.0  # never right: never passes
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(16, 1, 4) == pytest.approx(0.25)  # one right of 16, drawn in 4 of them
    assert pass_at_k(4, 3, 2) == 1.0  # only one wrong sample: two draws always hold a right one


def test_pass_at_1_is_the_share_right():
    for n in (1, 4, 16):
        for c in range(n + 1):
            assert pass_at_k(n, c, 1) == pytest.approx(c / n)


def test_it_is_the_share_of_draws_of_k_samples_that_hold_a_right_one():
    for n in range(1, 8):
        for c in range(n + 1):
            samples = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                draws = list(combinations(samples, k))
                assert pass_at_k(n, c, k) == pytest.approx(sum(map(any, draws)) / len(draws)), (n, c, k)


def test_it_grows_with_k_and_holds_for_many_samples():
    values = [pass_at_k(200, 7, k) for k in (1, 4, 16, 64)]
    assert values == sorted(values) and values[0] == pytest.approx(7 / 200) and values[-1] < 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(4, 1, 5), (4, 1, 0), (4, 5, 1), (4, -1, 1)])
def test_impossible_counts_are_refused(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
