"""BM25 of many texts at once, as FTS5 scores them: a keyword ranking scores hundreds per question.

Scored one at a time, a text was split into a Python list of words (a string object per word) and
each term counted in that list: about 11 µs per text, 7 ms of CPU for the ~700 texts a question
ranks at a million memories. Here the texts of one ranking are joined into one byte string and
split, matched and counted with numpy, whatever their number:

- **Words.** A word is a run of ``[a-z0-9]`` in lowercased ASCII text. A text holding other
  characters is first split as the index splits it (``servers.memory.terms.tokens``) and its words
  joined by spaces, so that its bytes past ASCII are all word bytes. Either way a text's words
  are those its full-text entry holds.
- **Keys.** A word's first 8 bytes, read as one 64-bit integer where it starts and masked to its
  length, are its key. A query word shorter than 8 bytes is found by its key alone (one
  ``searchsorted`` of every word's key among the query's); a longer one by its key, its length and
  then its remaining bytes; a prefix by the key's first bytes, then the rest.
- **Terms.** A word term's count in each text is its number of matches there; a phrase's, its words
  at consecutive positions of the same text.
- **Score.** Each term adds ``weight * tf * (K1 + 1) / (tf + norm)``, in the order the terms are
  given, ``norm`` being ``K1 * (1 - B + B * words / average_length)``: FTS5's formula and
  constants (k1 = 1.2, b = 0.75). A text scores the same bits whatever the texts beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from servers.memory.keyword import Term
from servers.memory.keyword_rank import K1, B
from servers.memory.terms import tokens

_KEY = 8
"""Bytes of a word read as its key."""
_WORD_BYTES = bytes(
    int(byte >= 0x80 or chr(byte) in "abcdefghijklmnopqrstuvwxyz0123456789") for byte in range(256)
)
"""A ``bytes.translate`` table: 1 for a byte of a word, else 0. Past ASCII every byte is a word's:
only texts split into words and joined by spaces hold such bytes."""
_LENGTH_MASK = np.array([(1 << (8 * length)) - 1 for length in range(_KEY + 1)], dtype=np.uint64)
"""The bits of a key that a word of each length (capped at ``_KEY``) fills."""


@dataclass(frozen=True, slots=True)
class Scores:
    scores: np.ndarray
    """Per text, its BM25 score (float64)."""
    whole: np.ndarray
    """Per text, whether it holds every term."""


def score_batch(texts: Sequence[str], weights: Sequence[tuple[Term, float]], average_length: float) -> Scores:
    """Each of ``texts`` (a memory's content, then its tags' JSON text after a space when it has
    some) scored by BM25 for the terms ``weights`` weighs; the module docstring says how."""
    parts = list(texts)
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    for n in [n for n, text in enumerate(texts) if not text.isascii()]:
        parts[n] = " ".join(tokens(texts[n]))
        lengths[n] = len(parts[n].encode())
    # A space before each text, and _KEY bytes after the last so that every key can be read whole.
    # Lowercasing the bytes changes only ASCII letters: a joined text's bytes past ASCII stay.
    joined = (" " + " ".join(parts) + " " * _KEY).encode().lower()
    text_starts = np.cumsum(lengths + 1) - lengths
    return _Split(joined, text_starts).scores(weights, average_length)


class _Split:
    """The words of the joined texts: where each starts, its length, its text and its key."""

    __slots__ = ("_bytes", "_keys", "_lengths", "_masks", "_starts", "_texts", "text_of", "words")

    def __init__(self, joined: bytes, text_starts: np.ndarray) -> None:
        self._bytes = np.frombuffer(joined, dtype=np.uint8)
        is_word = np.frombuffer(joined.translate(_WORD_BYTES), dtype=bool)
        self._starts = np.flatnonzero(is_word[1:] > is_word[:-1]) + 1
        self._lengths = np.flatnonzero(is_word[:-1] > is_word[1:]) + 1 - self._starts
        self._texts = text_starts.size
        first_words = np.searchsorted(self._starts, text_starts)
        self.words = np.diff(first_words, append=self._starts.size)
        self.text_of = np.repeat(np.arange(self._texts), self.words)
        # Eight bytes from each position, read in place (the last _KEY bytes are padding).
        at_each_byte = np.ndarray((len(joined) - _KEY + 1,), dtype="<u8", buffer=joined, strides=(1,))
        self._keys = at_each_byte[self._starts] & _LENGTH_MASK[np.minimum(self._lengths, _KEY)]
        self._masks: dict[tuple[str, bool], np.ndarray] = {}

    def scores(self, weights: Sequence[tuple[Term, float]], average_length: float) -> Scores:
        norm = K1 * (1 - B + B * self.words / average_length)
        scores = np.zeros(self._texts)
        whole = np.ones(self._texts, dtype=bool)
        for term, weight in weights:
            tf = self._counts(term)
            scores += weight * tf * (K1 + 1) / (tf + norm)
            whole &= tf > 0
        return Scores(scores, whole)

    def _counts(self, term: Term) -> np.ndarray:
        """The term's count in each text."""
        last = len(term.words) - 1
        at = self._matches(term.words[0], term.prefix and last == 0)
        for position in range(1, last + 1):
            following = self._matches(term.words[position], term.prefix and position == last)
            at = at[:-1] & following[position:]
        if last:
            at &= self.text_of[: at.size] == self.text_of[last:]
        return np.bincount(self.text_of[: at.size][at], minlength=self._texts)

    def _matches(self, word: str, prefix: bool) -> np.ndarray:
        """Per word of the texts, whether it is ``word`` (or, as a prefix, starts with it)."""
        cached = self._masks.get((word, prefix))
        if cached is not None:
            return cached
        wanted = word.encode()
        size = len(wanted)
        key = np.uint64(_key(wanted))
        found: np.ndarray
        if size < _KEY:  # the key holds the whole word, and a longer word's key holds more
            found = (self._keys & _LENGTH_MASK[size]) == key if prefix else self._keys == key
        else:
            found = (self._keys == key) & ((self._lengths >= size) if prefix else (self._lengths == size))
            if size > _KEY:
                candidates = np.flatnonzero(found)
                rest = self._bytes[self._starts[candidates, np.newaxis] + np.arange(_KEY, size)]
                found[candidates[(rest != np.frombuffer(wanted[_KEY:], dtype=np.uint8)).any(axis=1)]] = False
        self._masks[word, prefix] = found
        return found


def _key(word: bytes) -> int:
    return int.from_bytes(word[:_KEY].ljust(_KEY, b"\0"), "little")
