"""Answers compared as people read them, for every environment's exact-match rubric and the
judges' verdicts: case, accents, punctuation of any script and articles do not count."""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter


def normalize(text: str) -> str:
    """Lower case (casefolded), accents dropped (é -> e), punctuation of any script dropped (’ as
    ', « », ¿), no articles, single spaces: "Children’s Wing" and "childrens wing" match, and
    "José" matches "Jose"."""
    text = unicodedata.normalize("NFKD", text.casefold())
    text = "".join(ch for ch in text if not unicodedata.combining(ch) and not _punctuation(ch))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _punctuation(ch: str) -> bool:
    return ch in string.punctuation or unicodedata.category(ch).startswith("P")


def token_f1(prediction: str, reference: str) -> float:
    pred, ref = normalize(prediction).split(), normalize(reference).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)
