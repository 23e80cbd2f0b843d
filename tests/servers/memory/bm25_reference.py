"""BM25 of one text written out from its definition: what ``servers.memory.bm25`` must score."""

from __future__ import annotations

from collections.abc import Sequence

from servers.memory.keyword import Term
from servers.memory.keyword_rank import K1, B


def frequency(term: Term, words: Sequence[str]) -> int:
    """How often ``term`` occurs in a text of ``words``: a phrase at consecutive words, a prefix's
    last word as the start of one."""
    n = len(term.words)
    *whole, last = term.words
    return sum(
        1
        for start in range(len(words) - n + 1)
        if list(words[start : start + n - 1]) == whole
        and (words[start + n - 1].startswith(last) if term.prefix else words[start + n - 1] == last)
    )


def score(
    words: Sequence[str], weights: Sequence[tuple[Term, float]], average_length: float
) -> tuple[float, bool]:
    """A text's BM25 score, each term added in order, and whether it holds every term."""
    norm = K1 * (1 - B + B * len(words) / average_length)
    total = 0.0
    whole = True
    for term, weight in weights:
        tf = frequency(term, words)
        if tf:
            total += weight * tf * (K1 + 1) / (tf + norm)
        else:
            whole = False
    return total, whole
