"""An evaluation's log says the `samples` its config says (issue 53: a config of 1 sample with
best-of-2 was logged as "2 samples each"); the episodes best-of-n plays are said apart."""

from training.evaluation.services import _samples_words


def test_the_log_says_the_configs_samples_and_the_best_of_n_episodes_apart():
    assert _samples_words(1, 1) == "1 sample each"
    assert _samples_words(2, 1) == "2 samples each"
    assert _samples_words(1, 2) == "1 sample each, 2 episodes played so best-of-2 can choose"
    assert _samples_words(2, 4) == "2 samples each, 8 episodes played so best-of-4 can choose"
