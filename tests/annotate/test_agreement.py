"""Agreement statistics against hand-computed values and the `krippendorff` package."""

import random

import krippendorff
import numpy as np
import pytest

from annotate.agreement import krippendorff_alpha_ordinal, pairwise_agreement


def test_perfect_agreement_gives_alpha_one():
    assert krippendorff_alpha_ordinal([[1, 1], [5, 5], [3, 3], [2, 2, 2]]) == pytest.approx(1.0)


def test_systematic_opposition_gives_negative_alpha():
    assert krippendorff_alpha_ordinal([[1, 5], [5, 1], [1, 5]]) < 0


def test_alpha_is_undefined_without_pairable_variation():
    assert krippendorff_alpha_ordinal([[3, 3], [3, 3]]) is None
    assert krippendorff_alpha_ordinal([[1], [5]]) is None


@pytest.mark.parametrize("seed", range(5))
def test_alpha_matches_the_reference_implementation(seed):
    rng = random.Random(seed)
    units = [[rng.choice([1, 2, 3, 4, 5]) for _ in range(rng.choice([1, 2, 3, 4]))] for _ in range(60)]
    data = np.full((4, len(units)), np.nan)
    for j, votes in enumerate(units):
        for i, v in enumerate(votes):
            data[i, j] = v
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5])
    assert krippendorff_alpha_ordinal(units) == pytest.approx(expected)


def test_pairwise_agreement_handles_ties_three_ways():
    # Unit 1: A, A(weaker), B -> pairs (A,A) agree, (A,B) x2 disagree. Unit 2: tie vs B.
    result = pairwise_agreement([[1, 2, 5], [3, 4]])
    assert result.pairs == 4
    assert result.with_ties == pytest.approx(1 / 4)
    assert result.pairs_without_ties == 3
    assert result.excluding_ties == pytest.approx(1 / 3)
    assert result.tie_as_half == pytest.approx((1 + 0 + 0 + 0.5) / 4)


def test_pairwise_agreement_with_no_pairs():
    result = pairwise_agreement([[1], []])
    assert result.pairs == 0 and result.with_ties is None and result.tie_as_half is None
