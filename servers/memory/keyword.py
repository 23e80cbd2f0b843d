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
2. **Prefixes.** When no memory holds any term of the question, its words of at least
   ``PREFIX_MIN_CHARS`` characters search as prefixes (``9421804VK`` finds ``9421804VK1192A0001QX``,
   ``kubernet`` finds ``kubernetes``). Only then: a prefix next to whole words that do match only
   adds noise (``site *`` matching every ``sites``).
3. **Rarest first.** Each term's document frequency comes from the FTS5 vocabulary table
   (``memories_fts_vocab``, one B-tree lookup per word; a phrase counts as its rarest word, an upper
   bound). At most ``MAX_TERMS`` of the rarest are kept, and of those only as many, rarest first, as
   keep the memories they match together under ``CANDIDATE_CAP``; the rarest one always stays. A term
   held by a few thousand memories adds little to BM25 next to one held by ten.
4. **A capped candidate set.** When even the rarest kept term is held by more than ``CANDIDATE_CAP``
   memories (a question made only of common words), only the newest ``CANDIDATE_CAP`` memories
   matching it are ranked (``KeywordQuery.window``).

Document frequencies and the total count are FTS5's own statistics, over every agent, the same
numbers BM25 uses. Words are folded as the ``unicode61 remove_diacritics 2`` tokenizer folds them
(casefolded, accents removed), so ``Café`` is looked up as ``cafe``.

User text never reaches FTS5 as syntax: every term is quoted, so ``NEAR``, ``*``, ``:`` or an
unbalanced quote are just text; the one operator added is the prefix star after a quoted word.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from servers.memory.stopwords import STOPWORDS

MAX_TERMS = 8
"""Terms searched per query, the rarest ones."""
MAX_WORDS = 32
"""Words of a question considered at all (a pasted paragraph is not a keyword query)."""
CANDIDATE_CAP = 20_000
"""Memories ranked by BM25 per keyword query, at most."""
PREFIX_MIN_CHARS = 3
"""Shorter words never search as prefixes (``ab *`` would match half the vocabulary)."""

_WORD = re.compile(r"[^\W_]+")


def fold(word: str) -> str:
    """``word`` as the FTS5 tokenizer indexes it: casefolded, diacritics removed."""
    decomposed = unicodedata.normalize("NFD", word.casefold())
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


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
    common: list[Term] = []
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
            common += [Term((word,)) for word in words if Term((word,)) not in common]
        if seen >= MAX_WORDS:
            break
    return informative or common


async def _as_prefix(weighted: Weighted, prefixed: PrefixCounts) -> Weighted:
    words = weighted.term.words
    if len(words) > 1 or len(words[0]) < PREFIX_MIN_CHARS:
        return weighted
    held = await prefixed(words[0])
    return Weighted(Term(words, prefix=True), held) if held else weighted


def _trimmed(words: tuple[str, ...]) -> tuple[str, ...]:
    """A chunk's words without the stopwords at either end ("ana's" is "ana", "can't" nothing)."""
    start, stop = 0, len(words)
    while start < stop and words[start] in STOPWORDS:
        start += 1
    while stop > start and words[stop - 1] in STOPWORDS:
        stop -= 1
    return words[start:stop]


DocumentCounts = Callable[[Sequence[str]], Awaitable[Mapping[str, int]]]
"""How many memories hold each of these folded words (absent words: none)."""
PrefixCounts = Callable[[str], Awaitable[int]]
"""How many memories hold a word starting with this folded prefix (summed over the words)."""


@dataclass(frozen=True, slots=True)
class Weighted:
    term: Term
    documents: int
    """Memories holding the term (for a phrase: holding its rarest word, an upper bound)."""


@dataclass(frozen=True, slots=True)
class KeywordQuery:
    terms: tuple[Weighted, ...]
    """Rarest first."""
    window: int | None
    """Rank only the newest this-many matching memories (None: rank every match)."""

    @property
    def match(self) -> str:
        """An FTS5 expression matching any of the terms."""
        return " OR ".join(weighted.term.fts for weighted in self.terms)

    @property
    def match_all(self) -> str:
        """An FTS5 expression matching only memories that hold every term."""
        return " AND ".join(weighted.term.fts for weighted in self.terms)


async def keyword_query(
    text: str, documents: DocumentCounts, prefixed: PrefixCounts, *, cap: int = CANDIDATE_CAP
) -> KeywordQuery | None:
    """The bounded query of the module docstring for ``text``; None when it holds no word."""
    terms = terms_of(text)
    if not terms:
        return None
    counts = await documents(sorted({word for term in terms for word in term.words}))
    weighted = [Weighted(term, min(counts.get(word, 0) for word in term.words)) for term in terms]
    if not any(w.documents for w in weighted):
        weighted = [await _as_prefix(w, prefixed) for w in weighted]
    ranked = sorted(weighted, key=lambda w: w.documents)[:MAX_TERMS]
    kept = ranked[:1]
    total = ranked[0].documents
    for candidate in ranked[1:]:
        if total + candidate.documents > cap:
            break
        kept.append(candidate)
        total += candidate.documents
    return KeywordQuery(tuple(kept), window=cap if total > cap else None)
