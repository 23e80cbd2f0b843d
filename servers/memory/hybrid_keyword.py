"""Hybrid recall's keyword side: only the strong hits that can change the first ``limit`` results.

Fused (``servers.memory.recall``), a keyword hit counts only when it is *strong*, and then only by
``TIE_MARGIN`` added to its cosine similarity, or as the exact lookup. Ranking every candidate by
BM25 to find the strong ones read and split the text of every holder of the question's rare words,
about 600 texts a question at a million memories, most of them far from the question in cosine.
So, when the question has rare terms, the keyword side here:

1. takes the candidates from the full-text index alone (``keyword_rank.rare_first``), keeps those
   that could be strong at all (``keyword_rank.reachable``), and reads an upper bound of their
   cosine similarity to the question (their int8 vectors, ``servers.memory.vector_q8``, instead
   of their text), all on the read-only connection while the vector side searches on the writer;
2. once the vector side has answered, keeps the candidates that could enter the first ``limit``:
   a memory's fused score is at most its cosine plus ``TIE_MARGIN``, and the ``limit``-th fused
   score is at least the ``limit``-th neighbour's cosine, so a candidate whose bound is below that
   cut less the margin is never among the results, strong or not;
3. reads and scores the text of those and of the candidates the vector side returned, reads the
   exact cosine of the strong hits among them the vector side did not return, and fuses;
4. the exact lookup (one memory holding every term, and strong, comes first) can only change the
   result when the fused first memory does not hold every term: if it does, it is either that one
   memory, first already, or one of several, and there is no lookup. Only then are the other
   candidates holding every rare term read, until two hold every term.

A question of common words only (``KeywordQuery.window``) takes as candidates the newest memories
holding every term, then, when fewer than the keyword ranking keeps are the agent's, the newest
holding any, and goes through the same steps.

The same results as ranking every candidate (``tests/servers/memory/test_hybrid_keyword.py`` checks
them against a brute-force fusion on random stores), for the text of a handful of memories.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from servers.memory.keyword import KeywordQuery, Term
from servers.memory.keyword_rank import (
    Scored,
    Totals,
    idf,
    newest,
    rare_first,
    reachable,
    score_texts,
    totals,
)
from shared.db import Reads

Cosines = Callable[[Sequence[int]], Awaitable[dict[int, float]]]
"""Per id that is the agent's memory, its cosine similarity to the question (or a bound of it)."""


@dataclass(frozen=True, slots=True)
class Candidates:
    """The memories that may be strong hits, read from the index alone."""

    query: KeywordQuery
    ids: list[int]
    """With rare terms, best partial score first (the weights of the rare terms each holds); with
    common words only, the newest holding every term."""
    partial: dict[int, float]
    ceiling: dict[int, float]
    """For each candidate that is the agent's, a cosine similarity to the question its own is
    certainly not above (from the int8 copies of the vectors: ``servers.memory.vector_q8``)."""
    weights: list[tuple[Term, float]]
    indexed: Totals
    least: float
    """A strong hit scores at least this share of the query's total term weight."""
    wanted: int
    """Hits the keyword ranking would keep: with common words only, fewer of the agent's memories
    holding every term than this bring in the newest holding any (``KeywordQuery.window``)."""

    @property
    def floor(self) -> float:
        """What a strong hit scores at least: ``least`` of the query's total term weight (what a
        memory of the average length holding each term once scores)."""
        return self.least * sum(weight for _, weight in self.weights)


async def candidates(
    db: Reads, query: KeywordQuery, least: float, wanted: int, ceilings: Cosines
) -> Candidates:
    """Step 1 of the module docstring, the bounds of the candidates' cosines with it."""
    indexed = await totals(db)
    weights = [(w.term, factor * idf(indexed.rows, w.documents)) for w, factor in query.scored]
    if query.window is not None:
        ids = await newest(db, query.match_all, query.window)
        partial = dict.fromkeys(ids, sum(weight for _, weight in weights))
    else:
        ranked, partial = await rare_first(db, query, weights)
        ids = reachable(ranked, partial, query, weights, least)
    return Candidates(query, ids, partial, await ceilings(ids), weights, indexed, least, wanted)


@dataclass(frozen=True, slots=True)
class StrongHits:
    strong: set[int]
    """The strong hits that can be among the results."""
    similarity: dict[int, float]
    """Their cosine similarities, for those the vector side did not return."""
    lookup: int | None
    """The one memory holding every term of the query, when it is a strong hit (hybrid's exact lookup)."""


async def strong_hits(
    db: Reads,
    agent: str,
    found: Candidates,
    neighbours: Sequence[tuple[int, float]],
    ceilings: Cosines,
    cosines: Cosines,
    holding_every_term: Callable[[str, int], Awaitable[list[int]]],
    *,
    limit: int,
    margin: float,
    fuse: Callable[[Mapping[int, float], Collection[int]], list[int]],
) -> StrongHits:
    """Steps 2 to 4 of the module docstring; ``neighbours``: the vector side's, best first;
    ``ceilings`` and ``cosines``: bounds of the candidates' cosines and the cosines themselves;
    ``holding_every_term(match, k)``: up to ``k`` of the agent's memories matching ``match``."""
    returned = dict(neighbours)
    cut = neighbours[limit - 1][1] - margin if len(neighbours) >= limit else float("-inf")
    ceiling = dict(found.ceiling)
    ids = found.ids
    window = found.query.window
    if window is not None and sum(i in returned or i in ceiling for i in ids) < found.wanted:
        listed = set(ids)
        any_term = [i for i in await newest(db, found.query.match_any, window) if i not in listed]
        ceiling |= await ceilings([i for i in any_term if i not in returned])
        ids = [*ids, *any_term]
    relevant = [i for i in ids if i in returned or ceiling.get(i, cut - 1.0) >= cut]
    scored = await _scored(db, agent, found, relevant)
    strong = {memory_id for memory_id, score in scored.hits if score >= found.floor}
    kept = await cosines([memory_id for memory_id in strong if memory_id not in returned])
    holders = set(scored.whole)
    if found.query.prefixed:
        return StrongHits(strong, kept, None)
    first = fuse(returned | kept, strong)[:1]
    if first and first[0] in holders:
        return StrongHits(strong, kept, None)  # step 4: the lookup would change nothing
    lookup = await _lookup(db, agent, found, set(relevant), holders, holders & strong, holding_every_term)
    return StrongHits(strong, kept, lookup)


async def _lookup(
    db: Reads,
    agent: str,
    found: Candidates,
    read: set[int],
    holders: set[int],
    strong_holders: set[int],
    holding_every_term: Callable[[str, int], Awaitable[list[int]]],
) -> int | None:
    """Step 4: the one memory holding every term when it is a strong hit; ``holders`` and
    ``strong_holders``: those found among the texts ``read`` already."""
    # Holding every term, a memory holds every rare one: its partial score is their whole weight.
    rare = {w.term for w in found.query.terms}
    full = sum(weight for term, weight in found.weights if term in rare) * (1 - 1e-9)
    unread = [i for i in found.ids if found.partial[i] >= full and i not in read]
    start, chunk = 0, _LOOKUP_FIRST
    while start < len(unread) and len(holders) < 2:
        more = await _scored(db, agent, found, unread[start : start + chunk])
        holders |= set(more.whole)
        strong_holders |= {memory_id for memory_id, score in more.hits if score >= found.floor}
        start, chunk = start + chunk, chunk * 2
    window = found.query.window
    if len(holders) == 1 and window is not None and len(found.ids) >= window:
        # The newest ``window`` holders were read: older ones may hold every term too.
        holders |= set(await holding_every_term(found.query.match_all, 2))
    return next(iter(holders)) if len(holders) == 1 and holders <= strong_holders else None


_LOOKUP_FIRST = 8
"""Texts read by the first statement looking for the memories holding every term (step 4), twice as
many by each next one: two holders end the search, and they are often among the first few."""


async def _scored(db: Reads, agent: str, found: Candidates, ids: list[int]) -> Scored:
    return await score_texts(db, agent, ids, found.weights, found.indexed, max(len(ids), 1))
