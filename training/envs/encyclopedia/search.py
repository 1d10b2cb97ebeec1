"""BM25 over the corpus (Okapi, k1 = 1.5, b = 0.75), small and dependency-free."""

from __future__ import annotations

import math
import re
from collections import Counter

from training.envs.encyclopedia.corpus import Document

_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25Index:
    def __init__(self, documents: list[Document], *, k1: float = 1.5, b: float = 0.75):
        self.documents = documents
        self.k1, self.b = k1, b
        self.term_freqs = [Counter(tokenize(f"{d.title} {d.title} {d.text}")) for d in documents]
        self.lengths = [sum(tf.values()) for tf in self.term_freqs]
        self.avg_length = sum(self.lengths) / max(1, len(self.lengths))
        df = Counter(term for tf in self.term_freqs for term in tf)
        n = len(documents)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.postings: dict[str, list[int]] = {}
        for i, tf in enumerate(self.term_freqs):
            for term in tf:
                self.postings.setdefault(term, []).append(i)

    def search(self, query: str, k: int = 5) -> list[Document]:
        scores: dict[int, float] = {}
        for term in set(tokenize(query)):
            idf = self.idf.get(term)
            if idf is None:
                continue
            for i in self.postings[term]:
                tf = self.term_freqs[i][term]
                norm = tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg_length))
                scores[i] = scores.get(i, 0.0) + idf * norm
        ranked = sorted(scores, key=lambda i: (-scores[i], self.documents[i].doc_id))
        return [self.documents[i] for i in ranked[:k]]
