"""Simulated annotators: exact without noise, and agreeing at the configured rate with it."""

import random

import pytest

from training.simulated_annotators import AnnotatorProfile, simulated_choice


def _agreement(profile, pairs, seed=0):
    rng = random.Random(seed)
    agree = 0
    for ua, ub in pairs:
        choice = simulated_choice(utility_a=ua, utility_b=ub, left_is_a=rng.random() < 0.5, profile=profile, rng=rng)
        agree += (choice < 3) == (ua > ub)
    return agree / len(pairs)


PAIRS = [(random.Random(i).uniform(-10, 10), random.Random(i + 10_000).uniform(-10, 10)) for i in range(4000)]
PAIRS = [(a, b) for a, b in PAIRS if a != b]


def test_without_noise_the_higher_utility_always_wins():
    profile = AnnotatorProfile(temperature=0.0)
    assert _agreement(profile, PAIRS) == 1.0


def test_flip_noise_agrees_at_the_configured_rate():
    rate = _agreement(AnnotatorProfile(temperature=0.0, flip=0.25), PAIRS)
    assert rate == pytest.approx(0.75, abs=0.025)


def test_position_bias_picks_the_left_side():
    rng = random.Random(1)
    profile = AnnotatorProfile(temperature=0.0, position_bias=1.0)
    lefts = [simulated_choice(utility_a=0, utility_b=5, left_is_a=True, profile=profile, rng=rng) for _ in range(50)]
    assert set(lefts) <= {1, 2}


def test_strength_and_ties():
    rng = random.Random(0)
    exact = AnnotatorProfile(temperature=0.0)
    assert simulated_choice(utility_a=10, utility_b=0, left_is_a=True, profile=exact, rng=rng) == 1
    assert simulated_choice(utility_a=1, utility_b=0, left_is_a=True, profile=exact, rng=rng) == 2
    assert simulated_choice(utility_a=0, utility_b=3, left_is_a=True, profile=exact, rng=rng) == 4
    assert simulated_choice(utility_a=2, utility_b=2, left_is_a=True, profile=exact, rng=rng) == 3


def test_temperature_softens_choices():
    soft = _agreement(AnnotatorProfile(temperature=5.0), PAIRS)
    assert 0.6 < soft < 0.95


def test_an_annotator_with_its_own_weights_judges_by_its_own_utility():
    from training.envs.utility import RubricWeights

    quick_wrong = {"correct": False, "steps": 2, "tool_errors": 0, "loop": False, "utility": -2.0}
    slow_right = {"correct": True, "steps": 6, "tool_errors": 2, "loop": False, "utility": -6.0}
    stored = AnnotatorProfile(correct_first=False)
    weighted = AnnotatorProfile(weights=RubricWeights(correct=30.0), correct_first=False)
    assert stored.utility(quick_wrong) > stored.utility(slow_right)  # the stored utility: giving up early wins
    assert weighted.utility(slow_right) == 30 - 6 - 10 > weighted.utility(quick_wrong) == -2
    assert weighted.utility({"utility": 1.0}) is None  # cannot tell without the outcome's parts


def test_by_default_a_correct_answer_beats_any_wrong_one_and_efficiency_decides_the_rest():
    rng = random.Random(3)
    profile = AnnotatorProfile()  # correctness first, at temperature 1
    for _ in range(300):
        right = {
            "correct": True,
            "steps": rng.randint(1, 8),
            "tool_errors": rng.randint(0, 8),
            "loop": rng.random() < 0.3,
        }
        wrong = {"correct": False, "steps": rng.randint(1, 8), "tool_errors": 0, "loop": False}
        choice = simulated_choice(
            utility_a=profile.utility(right), utility_b=profile.utility(wrong), left_is_a=True, profile=profile, rng=rng
        )
        assert choice == 1  # A (the correct one) much better, every time
    quick = {"correct": True, "steps": 3, "tool_errors": 0, "loop": False}
    slow = {"correct": True, "steps": 7, "tool_errors": 1, "loop": False}
    assert profile.utility(quick) > profile.utility(slow)  # between two correct answers, the efficient one
    assert profile.utility({"utility": 5.0}) is None  # an outcome that does not say whether it is correct


def test_what_tells_two_wrong_answers_apart_is_a_setting_and_the_loop_ties_them():
    guess = {"correct": False, "steps": 2, "tool_errors": 0, "loop": False}
    search = {"correct": False, "steps": 7, "tool_errors": 0, "loop": False}
    sloppy = {"correct": False, "steps": 7, "tool_errors": 2, "loop": False}
    quick, slow = ({"correct": True, "steps": n, "tool_errors": 0, "loop": False} for n in (3, 7))
    tie, errors, steps = (AnnotatorProfile(wrong_pairs=rule) for rule in ("tie", "errors", "steps"))
    assert tie.utility(guess) == tie.utility(search) == tie.utility(sloppy)  # two wrong answers: equally bad
    assert errors.utility(guess) == errors.utility(search) > errors.utility(sloppy)  # errors count, length not
    assert steps.utility(guess) > steps.utility(search) > steps.utility(sloppy)  # the default: everything counts
    assert AnnotatorProfile().wrong_pairs == "steps"
    for profile in (tie, errors, steps):
        assert profile.utility(quick) > profile.utility(slow) > profile.utility(guess)  # steps count between right ones
        assert profile.both_bad(guess, search) and not profile.both_bad(quick, guess)
    assert (
        simulated_choice(
            utility_a=tie.utility(guess),
            utility_b=tie.utility(sloppy),
            left_is_a=True,
            profile=tie,
            rng=random.Random(0),
        )
        == 3
    )  # a tie
    with pytest.raises(ValueError, match="wrong_pairs"):
        AnnotatorProfile(wrong_pairs="length").validate()
