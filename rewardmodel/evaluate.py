"""How good a reward model's scores are on held-out pairs (plain Python and numpy).

- Accuracy: the share of pairs where the chosen side scores higher; equal scores count 0.5.
  Kept ties (margin 0) name no better side, so they are left out and only counted.
- A 95% percentile-bootstrap interval over pairs (1000 resamples, seeded, so the same scores
  always give the same interval).
- Accuracy by strength: pairs grouped by their aggregated vote margin, each exact value
  (rounded to 2 decimals) its own group. With the export's rules the values are few and mean
  something: under `majority` with k votes, margin 1 is a unanimous pair and 1/k a split
  one; under `mean`, 2 is "much better" from everyone. With `votes`, the same by number of
  votes.
- Calibration, reading the scores as a Bradley-Terry model: P(chosen) = sigmoid(s_c - s_r).
  The model's confidence is the probability of the side it prefers, in [0.5, 1]; the
  expected calibration error is the pair-weighted mean gap between confidence and accuracy
  over `n_bins` equal-width bins of it, and the reliability table gives each bin's count,
  mean confidence and accuracy for a chart.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from core.intervals import bootstrap_interval


def _credit(differences: np.ndarray) -> np.ndarray:
    """1 where the first side scored higher, 0.5 for equal scores, 0 where it scored lower."""
    return (differences > 0) + 0.5 * (differences == 0)


def _groups(keys: np.ndarray, credit: np.ndarray) -> list[dict]:
    return [
        {"value": float(key), "n": int((keys == key).sum()), "accuracy": float(credit[keys == key].mean())}
        for key in np.unique(keys)
    ]


def _calibration(differences: np.ndarray, credit: np.ndarray, n_bins: int) -> tuple[float, list[dict]]:
    p_chosen = 1.0 / (1.0 + np.exp(-differences))
    confidence = np.maximum(p_chosen, 1.0 - p_chosen)
    edges = np.linspace(0.5, 1.0, n_bins + 1)
    which = np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, n_bins - 1)
    table, ece = [], 0.0
    for b in range(n_bins):
        members = which == b
        count = int(members.sum())
        row = {
            "low": float(edges[b]),
            "high": float(edges[b + 1]),
            "count": count,
            "confidence": None,
            "accuracy": None,
        }
        if count:
            row["confidence"] = float(confidence[members].mean())
            row["accuracy"] = float(credit[members].mean())
            ece += count / len(differences) * abs(row["accuracy"] - row["confidence"])
        table.append(row)
    return float(ece), table


def pair_metrics(chosen_scores, rejected_scores, *, votes=None, margins=None, n_bins: int = 10) -> dict:
    """Accuracy with its interval, accuracy by strength, calibration and mean score margin (module docstring).

    Returns plain floats and lists (JSON-ready): n, ties, accuracy, accuracy_ci, log_loss,
    mean_margin, ece, reliability, by_strength, by_votes. With no pair left the figures are None.
    """
    chosen = np.asarray(chosen_scores, dtype=float)
    rejected = np.asarray(rejected_scores, dtype=float)
    if chosen.shape != rejected.shape:
        raise ValueError("chosen and rejected scores differ in length")
    kept = np.ones(len(chosen), dtype=bool) if margins is None else np.asarray(margins, dtype=float) != 0
    differences = (chosen - rejected)[kept]
    result = {
        "n": int(kept.sum()),
        "ties": int((~kept).sum()),
        "accuracy": None,
        "accuracy_ci": None,
        "log_loss": None,
        "mean_margin": None,
        "ece": None,
        "reliability": [],
        "by_strength": [],
        "by_votes": [],
    }
    if not len(differences):
        return result
    credit = _credit(differences)
    result["accuracy"] = float(credit.mean())
    result["accuracy_ci"] = list(bootstrap_interval(credit))
    result["log_loss"] = float(np.logaddexp(0.0, -differences).mean())  # -log sigmoid(s_c - s_r)
    result["mean_margin"] = float(differences.mean())
    result["ece"], result["reliability"] = _calibration(differences, credit, n_bins)
    if margins is not None:
        result["by_strength"] = _groups(np.round(np.asarray(margins, dtype=float)[kept], 2), credit)
    if votes is not None:
        result["by_votes"] = _groups(np.asarray(votes)[kept], credit)
    return result


def ordering_accuracy(items: Iterable[tuple[float, float, float, float]]) -> dict:
    """Agreement with a known ordering (rubric utility, say) for (score_x, score_y, truth_x, truth_y).

    Pairs with equal truth are skipped (counted); equal scores count 0.5. Returns n, skipped,
    accuracy and accuracy_ci (None when no pair is left).
    """
    rows = np.asarray(list(items), dtype=float).reshape(-1, 4)
    truth = rows[:, 2] - rows[:, 3]
    kept = truth != 0
    credit = _credit((rows[kept, 0] - rows[kept, 1]) * np.sign(truth[kept]))
    if not len(credit):
        return {"n": 0, "skipped": int((~kept).sum()), "accuracy": None, "accuracy_ci": None}
    return {
        "n": len(credit),
        "skipped": int((~kept).sum()),
        "accuracy": float(credit.mean()),
        "accuracy_ci": list(bootstrap_interval(credit)),
    }
