"""BM25 of our own over a bounded candidate set: keyword recall's cost does not grow with the store.

FTS5's ``bm25()`` reads each term's whole doclist once per query to count its documents, and the
position lists of every matching row: 5 to 30 µs per candidate and per common term of the
question, most of a keyword recall at a million memories. So ranking is done here, in two stages:

Which of two rankers runs is decided per question from the terms' counts (``fts5_is_cheaper``):
FTS5's own ``bm25()`` while the store is small enough that counting the terms' doclists costs
less than reading the candidates' text, and otherwise the two stages below. Both score alike.

1. **Candidates.** The memories holding one of the query's candidate terms (rare by construction,
   ``servers.memory.keyword``), their ids read from the full-text index alone, each term's list
   at most ``PROBE`` long. Each candidate's *partial score* is the summed BM25 weight (IDF) of the
   candidate terms it holds; the best ``RANK_CAP`` by partial score, newest first among equals,
   go on. A question of common words only takes the newest ``RANK_CAP`` memories holding all of
   its terms instead (then, when fewer than asked for do, the newest holding any).
2. **Ranking.** Those memories' text is read by primary key (the agent checked on each row), and
   all of them are split into words as the index splits them and scored by BM25 over every term
   of the query at once (``servers.memory.bm25``), with FTS5's formula and constants (k1 = 1.2,
   b = 0.75, IDF ``ln((N - n + 0.5) / (n + 0.5))`` floored at 1e-6), N and the average length from
   FTS5's own totals record and each word's n from the ``memory_terms`` side table.

Scores are positive, higher is better, on FTS5's scale: a memory holding each term once, of the
average length, scores the sum of the terms' weights (``KeywordQuery.weight``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress
from operator import itemgetter

from servers.memory.keyword import KeywordQuery, Term
from servers.memory.terms import indexed_text
from shared.db import Reads

K1 = 1.2
B = 0.75
WALK_US = 0.04
"""FTS5's ``bm25()``, per doclist entry of each term it counts."""
FTS5_ROW_US = 3.2
"""FTS5's ``bm25()``, per candidate it scores."""
READ_US = 6.6
"""Reading a candidate's text by primary key and scoring it here (``servers.memory.bm25``)."""
OWN_FIXED_US = 300.0
"""What ranking here costs a question beyond FTS5's ranking, whatever the candidates: a statement
more (their ids, then their text) and numpy's calls. These four figures were fitted to both
rankers' times on 1,110 questions (``bench.recall_scale``'s) at 100,000 and a million
memories; so chosen, a question took 3.28 and 5.27 ms on average where always the faster of the
two would have taken 3.20 and 5.22 ms."""
RANK_CAP = 1_000
"""Memories whose text is read and scored per query, at most (stage 2 of the module docstring): as
many as one rare term's holders, so a question with one rare word ranks them all."""

Hit = tuple[int, float]
"""(memory id, BM25 score)"""


@dataclass(frozen=True, slots=True)
class Ranked:
    hits: list[Hit]
    """The best hits, best first."""
    whole: list[int] | None
    """The agent's memories holding every term of the query, when the ranking read all of them
    (None when more may exist): hybrid recall's exact-lookup rule needs no statement of its own."""


def idf(documents: int, matching: int) -> float:
    """FTS5's BM25 inverse document frequency of a term found in ``matching`` of ``documents``."""
    return max(math.log((documents - matching + 0.5) / (matching + 0.5)), 1e-6)


def term_weights(query: KeywordQuery, indexed: Totals) -> list[tuple[Term, float]]:
    """Each term that counts in the ranking with its weight: its IDF times its factor."""
    return [(w.term, factor * idf(indexed.rows, w.documents)) for w, factor in query.scored]


@dataclass(frozen=True, slots=True)
class Totals:
    """FTS5's totals record: memories indexed, and words indexed over every column."""

    rows: int
    words: int

    @property
    def average_length(self) -> float:
        return self.words / self.rows if self.rows and self.words else 1.0


async def totals(db: Reads) -> Totals:
    """Read from FTS5's ``averages`` record (id 1 of its data table: varints, the row count then one
    total per column; the SQLite file format keeps it stable). ``count(*)`` would read every row."""
    row = await db.fetchone("SELECT block FROM memories_fts_data WHERE id = 1")
    values = _varints(bytes(row[0])) if row is not None and row[0] else []
    return Totals(values[0], sum(values[1:])) if values else Totals(0, 0)


async def ranked(
    db: Reads,
    agent: str,
    query: KeywordQuery,
    k: int,
    *,
    cap: int = RANK_CAP,
    allow_fts5: bool = True,
    least: float | None = None,
) -> Ranked:
    """The agent's ``k`` best memories for ``query`` by BM25, best first (the module docstring);
    ``allow_fts5=False`` always ranks here.

    ``least``: only hits scoring at least this share of the query's total weight matter (hybrid
    recall's strong hits); a candidate that cannot reach it whatever its text is not read
    (``reachable``), and fewer than ``k`` hits may come back.
    """
    indexed = await totals(db)
    weights = term_weights(query, indexed)
    cap = max(cap, k)
    if query.window is None and allow_fts5 and fts5_is_cheaper(query, cap):
        return Ranked(await fts5_bm25(db, agent, query, k), None)
    if query.window is None:
        candidates, partial = await rare_first(db, query, weights)
        if least is not None:
            candidates = reachable(candidates, partial, query, weights, least)
        scored = await score_texts(db, agent, candidates, weights, indexed, cap)
        return Ranked(scored.hits[:k], scored.whole if scored.read_all else None)
    window = await newest_scored(db, agent, query, weights, indexed, k, cap)
    scored, hits = window.holding_all, window.holding_all.hits
    if window.holding_any is not None:
        hits = hits + window.holding_any.hits[: k - len(hits)]
    return Ranked(hits[:k], scored.whole if scored.read_all and len(window.ids) < query.window else None)


def fts5_is_cheaper(query: KeywordQuery, cap: int) -> bool:
    """Whether FTS5's own ``bm25()`` ranks the candidates for less CPU than reading their text.

    It counts every term's whole doclist, which costs little while the store is small; reading
    the candidates' text costs the same at any size. The counts are known before either runs.
    """
    candidates = sum(w.documents for w in query.terms)
    walked = sum(w.documents for w, _ in query.scored)
    return WALK_US * walked + FTS5_ROW_US * candidates <= READ_US * min(candidates, cap) + OWN_FIXED_US


async def fts5_bm25(db: Reads, agent: str, query: KeywordQuery, k: int = -1, least: float = 0.0) -> list[Hit]:
    """The agent's ``k`` best hits (every one for -1) scoring at least ``least``, by FTS5's ``bm25()``."""
    rows = await db.fetchall(
        # CROSS JOIN keeps the full-text index the outer loop: see MemoryStore.holders.
        "SELECT m.id, -bm25(memories_fts) AS score FROM memories_fts "
        "CROSS JOIN memories AS m ON m.id = memories_fts.rowid "
        "WHERE memories_fts MATCH ? AND m.agent = ? AND score >= ? ORDER BY score DESC, m.id DESC LIMIT ?",
        (query.match, agent, least, k),
    )
    return [(int(row[0]), float(row[1])) for row in rows]


def reachable(
    candidates: list[int],
    partial: dict[int, float],
    query: KeywordQuery,
    weights: Sequence[tuple[Term, float]],
    least: float,
) -> list[int]:
    """The first of ``candidates`` (by partial score, best first) that may score ``least`` of the
    total weight.

    A term adds at most ``(K1 + 1)`` times its weight to a text's BM25 score, however often the
    text holds it and however short the text is. A candidate holds exactly the candidate terms its
    partial score counts, and may hold every ranking term: so ``(K1 + 1) x (partial + the ranking
    terms' weights)`` bounds its score, and one whose bound is below the floor is left out without
    reading its text. Exact: no hit that reaches the floor is lost. A memory holding every term has
    the highest partial score and is never left out.
    """
    total = sum(weight for _, weight in weights)
    candidate_terms = {w.term for w in query.terms}
    ranking = sum(weight for term, weight in weights if term not in candidate_terms)
    floor = least * total / (K1 + 1) - ranking
    kept = len(candidates)
    while kept and partial[candidates[kept - 1]] < floor:
        kept -= 1
    return candidates[:kept]


async def rare_first(
    db: Reads, query: KeywordQuery, weights: Sequence[tuple[Term, float]]
) -> tuple[list[int], dict[int, float]]:
    """Ids holding a candidate term, by partial score (the weights of those they hold), newest first
    among equals; and each one's partial score."""
    weight = dict(weights)
    each = "SELECT * FROM (SELECT ? AS term, rowid FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)"
    rows = await db.fetchall(
        " UNION ALL ".join([each] * len(query.terms)),
        [value for n, w in enumerate(query.terms) for value in (n, w.term.fts, max(w.documents, RANK_CAP))],
    )
    # Per row a list index, not a term's hash: a question reads up to MAX_TERMS * RANK_CAP rows.
    term_weight = [weight[w.term] for w in query.terms]
    partial: dict[int, float] = {}
    for n, memory_id in rows:
        partial[memory_id] = partial.get(memory_id, 0.0) + term_weight[n]
    # Highest partial score first, newest (highest id) first among equals: ids are distinct.
    ranked = sorted(partial.items(), key=itemgetter(1, 0), reverse=True)
    return [memory_id for memory_id, _ in ranked], partial


@dataclass(frozen=True, slots=True)
class Window:
    """A question of common words only (``KeywordQuery.window``), its candidates scored."""

    ids: list[int]
    """The newest memories (of every agent) holding every term, a window of them at most."""
    holding_all: Scored
    """The agent's among them."""
    holding_any: Scored | None
    """When fewer of those than wanted: the agent's among the newest holding any term (a window of
    them at most), those of ``ids`` left out."""


async def newest_scored(
    db: Reads,
    agent: str,
    query: KeywordQuery,
    weights: Sequence[tuple[Term, float]],
    indexed: Totals,
    wanted: int,
    cap: int | None = None,
) -> Window:
    """Stage 1 and 2 of the module docstring for a question of common words only: the newest
    holding every term, then, when fewer than ``wanted`` of them are the agent's, the newest holding
    any; ``cap``: as ``score_texts``'s."""
    assert query.window is not None
    ids = await newest(db, query.match_all, query.window)
    holding_all = await score_texts(db, agent, ids, weights, indexed, cap)
    if len(holding_all.hits) >= wanted:
        return Window(ids, holding_all, None)
    listed = set(ids)
    any_term = [i for i in await newest(db, query.match_any, query.window) if i not in listed]
    return Window(ids, holding_all, await score_texts(db, agent, any_term, weights, indexed, cap))


async def newest(db: Reads, match: str, window: int) -> list[int]:
    rows = await db.fetchall(
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rowid DESC LIMIT ?",
        (match, window),
    )
    return [int(row[0]) for row in rows]


@dataclass(frozen=True, slots=True)
class Scored:
    hits: list[Hit]
    whole: list[int]
    """Those holding every term."""
    consumed: int
    """How many of the candidates, from the first, were read or found not to be the agent's: those
    after them were left out by the cap."""
    read_all: bool
    """Whether every candidate was (none was left out by the cap)."""


async def score_texts(
    db: Reads,
    agent: str,
    candidates: Sequence[int],
    weights: Sequence[tuple[Term, float]],
    indexed: Totals,
    cap: int | None = None,
) -> Scored:
    """The first ``cap`` of ``candidates`` that are the agent's (every one without a cap), scored
    (``servers.memory.bm25``), best first (newest among equals).

    Read ``cap`` at a time: other agents' memories share the index, and are skipped.
    """
    from servers.memory.bm25 import score_batch  # numpy comes with it: see test_idle_imports

    if cap is None:
        cap = max(len(candidates), 1)
    hits: list[Hit] = []
    whole: list[int] = []
    start = 0
    while start < len(candidates) and len(hits) < cap:
        chunk = candidates[start : start + cap]
        rows = await db.fetchall(
            # By primary key, the agent checked on each row: see MemoryStore.by_ids.
            "SELECT id, content, tags FROM memories WHERE id IN (SELECT value FROM json_each(?)) "
            "AND +agent = ?",
            (json.dumps(list(chunk)), agent),
        )
        order = {memory_id: position for position, memory_id in enumerate(chunk)}
        rows.sort(key=lambda row: order[row[0]])
        if len(rows) > cap - len(hits):
            rows = rows[: cap - len(hits)]
            start += order[rows[-1][0]] + 1
        else:
            start += len(chunk)
        ids = [int(row[0]) for row in rows]
        scored = score_batch(
            [indexed_text(content, tags) for _, content, tags in rows],
            weights,
            indexed.average_length,
        )
        hits += zip(ids, scored.scores.tolist(), strict=True)
        whole += compress(ids, scored.whole.tolist())
    hits.sort(key=lambda hit: (-hit[1], -hit[0]))
    return Scored(hits, whole, start, start >= len(candidates))


def _varints(blob: bytes) -> list[int]:
    """The SQLite varints ``blob`` holds: 7 bits a byte, big-endian, a ninth byte whole."""
    values: list[int] = []
    position = 0
    while position < len(blob):
        value = 0
        for length in range(9):
            byte = blob[position + length] if position + length < len(blob) else 0
            if length == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
        position += length + 1
    return values
