"""The pipeline's behaviour-cloning bar never goes back when cloning extends its steps (issue 53:
99% then 91%)."""

from training.pipeline import rising


def test_a_rising_progress_holds_its_highest_fraction_and_passes_the_message():
    seen = []
    report = rising(lambda fraction, message="": seen.append((fraction, message)))
    for fraction in (0.5, 0.99, 0.91, 0.95, 1.0):
        report(fraction, "behaviour cloning")
    assert [f for f, _ in seen] == [0.5, 0.99, 0.99, 0.99, 1.0]
    assert {m for _, m in seen} == {"behaviour cloning"}
