"""The keyword side of recall: an FTS5 query made of a question's informative terms, bounded in cost.

BM25 ranking costs about a microsecond per matching memory, so a query ORing every word of a
question ranks most of the store: at a million memories ``the OR a OR to OR is`` matched 904k rows
and took 814 ms. The keyword query is therefore built from what tells memories apart:

1. **Terms.** The question is split at whitespace into chunks. A chunk of one word is a term; a chunk
   of several words joined by punctuation (``SN-4411-B``, ``e-mail``, ``v2.3.1``,
   ``ana@example.com``) is a *phrase* term, and its words are terms too: the memory holding the
   name as written matches both and ranks first, one holding it written otherwise still matches.
   English stopwords (``servers.memory.stopwords``) are left out, also at either end of a chunk
   (``Ana's`` is ``ana``), unless the question holds nothing else.
2. **Rare terms only.** How many memories hold each word is read from the ``memory_terms`` side
   table (``servers.memory.terms``); a phrase or a prefix is counted up to ``PROBE`` (a bounded walk
   of its FTS5 doclist). Terms held by at most ``PROBE`` memories are *rare*; a memory must hold
   one of the ``MAX_TERMS`` rarest to be a candidate, so at most ``MAX_TERMS * PROBE`` memories are
   candidates whatever the store's size, ranked by BM25 (``servers.memory.keyword_rank`` says how,
   and how the cost stays bounded). The other terms (common ones, up to
   ``MAX_TERMS``) still count in that ranking: among the hundreds of memories sharing one rare
   word with the question, the one holding its other words too comes first.
3. **Common words only.** A question with no rare term (``what is it?``) ranks the newest
   ``CANDIDATE_CAP`` memories holding all of its terms, then, when fewer than asked for do, the
   newest ``CANDIDATE_CAP`` holding any of them (``KeywordQuery.window``): a memory holding every
   word of the question is found however old it is, unless more than ``CANDIDATE_CAP`` do.
4. **Prefixes.** When no memory holds any term of the question, its words of at least
   ``PREFIX_MIN_CHARS`` characters search as prefixes (``9421804VK`` finds ``9421804VK1192A0001QX``,
   ``kubernet`` finds ``kubernetes``). Only then: a prefix next to whole words that do match only
   adds noise (``site *`` matching every ``sites``).

Counts are over every agent, as FTS5's own BM25 statistics are.

User text never reaches FTS5 as syntax: every term is quoted, so ``NEAR``, ``*``, ``:`` or an
unbalanced quote are just text; the one operator added is the prefix star after a quoted word.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from servers.memory.stopwords import STOPWORDS
from servers.memory.terms import fold

MAX_TERMS = 8
"""Terms searched per query, the rarest ones."""
MAX_WORDS = 32
"""Words of a question considered at all (a pasted paragraph is not a keyword query)."""
PROBE = 1_000
"""A term held by more memories than this is common (rule 2 of the module docstring)."""
CANDIDATE_CAP = 400
"""Newest memories ranked by BM25 for a question made of common terms only."""
PREFIX_MIN_CHARS = 3
"""Shorter words never search as prefixes (``ab *`` would match half the vocabulary)."""

_WORD = re.compile(r"[^\W_]+")


def quoted(text: str) -> str:
    """Text as an FTS5 string (a phrase when it holds several words): never syntax."""
    return '"' + text.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class Term:
    words: tuple[str, ...]
    """Folded words; several make a phrase."""
    prefix: bool = False

    @property
    def fts(self) -> str:
        return quoted(" ".join(self.words)) + (" *" if self.prefix else "")


def terms_of(text: str) -> list[Term]:
    """The distinct terms of ``text`` in order (rule 1 of the module docstring)."""
    informative: list[Term] = []
    only_stopwords: list[Term] = []
    seen = 0
    for chunk in text.split():
        words = tuple(fold(word) for word in _WORD.findall(chunk))[: MAX_WORDS - seen]
        seen += len(words)
        if not words:
            continue
        core = _trimmed(words)
        if core:
            found = [Term(core)]
            if len(core) > 1:
                found += [Term((word,)) for word in core if word not in STOPWORDS]
            informative += [term for term in found if term not in informative]
        else:
            only_stopwords += [Term((word,)) for word in words if Term((word,)) not in only_stopwords]
        if seen >= MAX_WORDS:
            break
    return informative or only_stopwords


def _trimmed(words: tuple[str, ...]) -> tuple[str, ...]:
    """A chunk's words without the stopwords at either end ("ana's" is "ana", "can't" nothing)."""
    start, stop = 0, len(words)
    while start < stop and words[start] in STOPWORDS:
        start += 1
    while stop > start and words[stop - 1] in STOPWORDS:
        stop -= 1
    return words[start:stop]


HeldBy = Callable[[Sequence["Term"], int], Awaitable[list[int]]]
"""How many memories hold each term: exactly for a word, for a phrase or a prefix counted up to the
given number (then that number)."""


@dataclass(frozen=True, slots=True)
class Weighted:
    term: Term
    documents: int
    """Memories holding the term (a phrase's or a prefix's counted up to ``PROBE + 1``)."""


@dataclass(frozen=True, slots=True)
class KeywordQuery:
    terms: tuple[Weighted, ...]
    """What a memory must hold one of to be a candidate, rarest first."""
    ranking: tuple[Weighted, ...] = ()
    """Terms that only rank the candidates (rule 2): common ones, and rare ones past ``MAX_TERMS``."""
    window: int | None = None
    """Rank the newest this-many memories holding every term, then any (None: the rare terms' holders)."""

    @property
    def scored(self) -> tuple[tuple[Weighted, int], ...]:
        """Every term that counts in the ranking, with its factor: with ranking terms, a candidate
        term counts twice (it is what the question is found by; the weights were tuned so)."""
        factor = 2 if self.ranking else 1
        return (*((w, factor) for w in self.terms), *((w, 1) for w in self.ranking))

    @property
    def match(self) -> str:
        """An FTS5 expression matching the memories holding any of ``terms``, ranked by every term.

        With ranking terms it reads ``(r1 OR r2) AND (r1 OR r2 OR c1 OR c2)``: the same memories as
        ``r1 OR r2``, but FTS5's ``bm25()`` scores each phrase of the expression, so the common terms
        count too and the rare ones twice, as :attr:`scored` weighs them.
        """
        candidates = " OR ".join(weighted.term.fts for weighted in self.terms)
        if not self.ranking:
            return candidates
        return f"({candidates}) AND ({candidates} OR {' OR '.join(w.term.fts for w in self.ranking)})"

    @property
    def match_any(self) -> str:
        """An FTS5 expression matching the memories holding any term."""
        return " OR ".join(weighted.term.fts for weighted in (*self.terms, *self.ranking))

    @property
    def prefixed(self) -> bool:
        """Whether the terms are prefixes (rule 4): then no memory holds a word of the question."""
        return any(weighted.term.prefix for weighted in self.terms)

    @property
    def match_all(self) -> str:
        """An FTS5 expression matching only memories that hold every term."""
        return " AND ".join(weighted.term.fts for weighted in (*self.terms, *self.ranking))

    def weight(self, idf: Callable[[int], float]) -> float:
        """What a memory of the average length holding each term once scores: their weighted IDFs."""
        return sum(factor * idf(weighted.documents) for weighted, factor in self.scored)


async def keyword_query(
    text: str, held_by: HeldBy, *, probe: int = PROBE, cap: int = CANDIDATE_CAP
) -> KeywordQuery | None:
    """The bounded query of the module docstring for ``text``; None when it holds no word."""
    terms = terms_of(text)
    if not terms:
        return None
    counts = await held_by(terms, probe + 1)
    weighted = [Weighted(term, held) for term, held in zip(terms, counts, strict=True)]
    if not any(counts):
        weighted = await _as_prefixes(weighted, held_by, probe)
    rare = sorted((w for w in weighted if w.documents <= probe), key=lambda w: w.documents)
    if not rare:
        return KeywordQuery(tuple(weighted[:MAX_TERMS]), window=cap)
    common = [w for w in weighted if w.documents > probe]
    return KeywordQuery(tuple(rare[:MAX_TERMS]), ranking=tuple([*rare[MAX_TERMS:], *common][:MAX_TERMS]))


async def _as_prefixes(weighted: list[Weighted], held_by: HeldBy, probe: int) -> list[Weighted]:
    """Each single word long enough as a prefix, where some memory holds a word starting with it."""
    prefixes = [
        Term(w.term.words, prefix=True)
        for w in weighted
        if len(w.term.words) == 1 and len(w.term.words[0]) >= PREFIX_MIN_CHARS
    ]
    counts = dict(zip(prefixes, await held_by(prefixes, probe + 1), strict=True))
    extended = [
        Weighted(prefix, counts[prefix])
        for w in weighted
        if counts.get(prefix := Term(w.term.words, prefix=True), 0)
    ]
    return extended or weighted
