"""Hybrid recall returns what fusing every keyword candidate returns, keyword recall's best strong hits
kept among the results, reading the text of its first candidates and of those past them that can
change the results (servers.memory.hybrid_keyword)."""

from __future__ import annotations

import random
import zlib
from collections.abc import AsyncIterator
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from servers.memory.keyword import KeywordQuery, Weighted, keyword_query
from servers.memory.keyword_rank import RANK_CAP, fts5_is_cheaper, term_weights, totals
from servers.memory.models import NewMemory
from servers.memory.recall import (
    MIN_CANDIDATES,
    MIN_NEIGHBOURS,
    STRONG_SHARE,
    TIE_MARGIN,
    Recaller,
    keyword_places,
    with_places_kept,
)
from servers.memory.state import MIGRATIONS
from servers.memory.store import MemoryStore
from servers.memory.terms import document_tokens
from servers.memory.vector_codes import unit_matrix
from servers.memory.vectors import VectorIndex
from shared.db import Database, Reads
from tests.servers.memory.bm25_reference import frequency, score
from tests.servers.memory.conftest import Clock

pytestmark = pytest.mark.anyio

DIM = 16
LIMIT = 5
PROBE = 12
"""Words held by more memories than this are common: a few hundred memories have both kinds."""


class CountingReads:
    """The store's read connection, counting the memories whose text a statement read."""

    def __init__(self, db: Reads) -> None:
        self._db = db
        self.texts = 0

    async def fetchall(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        rows = await self._db.fetchall(sql, params)
        if sql.startswith("SELECT id, content, tags FROM memories"):
            self.texts += len(rows)
        return rows

    async def fetchone(self, sql: str, params: Any = ()) -> tuple[Any, ...] | None:
        return await self._db.fetchone(sql, params)


def direction(word: str) -> np.ndarray:
    return np.random.default_rng(zlib.crc32(word.encode())).standard_normal(DIM).astype(np.float32)


def embedding(text: str, noise: int | None = None) -> np.ndarray:
    """A bag of the text's word directions plus a little noise: texts sharing words are near."""
    summed = sum((direction(word) for word in text.split()), np.zeros(DIM, dtype=np.float32))
    if noise is not None:
        summed += np.random.default_rng(noise).standard_normal(DIM).astype(np.float32) * 0.3
    return np.asarray(summed, dtype=np.float32)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    async with Database.open(tmp_path / "memory.db", MIGRATIONS, load_vec=True) as db:
        index = VectorIndex(db, DIM)
        await index.load()
        yield MemoryStore(db, index, reader=CountingReads(db), clock=Clock())


async def fill(store: MemoryStore, texts: list[str], agent: str = "nexo") -> dict[int, str]:
    stored = await store.add_many(
        [
            (NewMemory(agent, text, (), "fact", "owner", 0.5), embedding(text, n))
            for n, text in enumerate(texts)
        ]
    )
    return {item.memory.id: item.memory.content for item in stored}


async def brute_force(
    store: MemoryStore,
    texts: dict[int, str],
    question: str,
    *,
    probe: int = PROBE,
    cap: int = RANK_CAP,
    fts5: bool = True,
) -> list[int]:
    """Hybrid recall written out from its definition: every memory's exact cosine and BM25, the
    strong hits among the memories holding a rare term of the question, fused, the lookup first,
    and the best strong hits of keyword recall's ranking in the last places: of the first ``cap``
    candidates by the weight of the rare terms each holds, or of every candidate where keyword
    recall ranks with FTS5's ``bm25()`` (``fts5`` allowed and cheaper)."""
    query = await keyword_query(question, store.term_documents, probe=probe)
    assert query is not None
    indexed = await totals(store.db)
    weights = term_weights(query, indexed)
    floor = STRONG_SHARE * sum(weight for _, weight in weights)
    rows = await store.db.fetchall("SELECT memory_id, embedding FROM memory_vectors WHERE agent = 'nexo'")
    asked = unit_matrix([embedding(question)], DIM, lambda _: "question")[0]
    cosine = {int(i): 1.0 - float(1.0 - np.frombuffer(blob, dtype=np.float32) @ asked) for i, blob in rows}
    neighbours = sorted(cosine, key=lambda i: (-cosine[i], i))[: max(2 * LIMIT, MIN_NEIGHBOURS)]
    scored = {
        memory_id: score(_words(text), weights, indexed.average_length) for memory_id, text in texts.items()
    }
    holders = [memory_id for memory_id, (_, every_term) in scored.items() if every_term]
    if query.window is None:  # candidates: the holders of a rare term
        candidates = {i for i, text in texts.items() if _holds(query.terms, text)}
    elif len(holders) >= max(3 * LIMIT, MIN_CANDIDATES):  # common words only: the holders of all
        candidates = set(holders)
    else:  # too few of those: the holders of any
        candidates = {i for i, text in texts.items() if _holds(query.terms, text)}
    strong = {i for i in candidates if scored[i][0] >= floor}
    fused = {i: cosine[i] + (TIE_MARGIN if i in strong else 0.0) for i in {*neighbours, *strong}}
    ranked = sorted(fused, key=lambda i: (-fused[i], i))
    if len(holders) == 1 and holders[0] in strong and not query.prefixed:
        ranked = [holders[0], *(i for i in ranked if i != holders[0])]
    rare = {w.term for w in query.terms}
    partial = {
        i: sum(weight for term, weight in weights if term in rare and frequency(term, _words(texts[i])))
        for i in candidates
    }
    every = query.window is not None or (fts5 and fts5_is_cheaper(query, cap))
    first = sorted(candidates, key=lambda i: (-partial[i], -i))[: None if every else cap]
    best = sorted((i for i in first if i in strong), key=lambda i: (-scored[i][0], -i))
    return with_places_kept(ranked, best[: keyword_places(LIMIT)], LIMIT)


def corpus(rng: random.Random, n: int) -> list[str]:
    """Texts of 4 to 9 words, a few words in many texts and most in few, some with a serial number."""
    vocabulary = [f"w{k}" for k in range(80)]
    weights = [1.0 / (k + 1) for k in range(80)]
    texts = {
        " ".join(rng.choices(vocabulary, weights, k=rng.randint(4, 9)))
        + (f" sn{rng.randrange(10_000)}x" if rng.random() < 0.1 else "")
        for _ in range(n)
    }
    return sorted(texts)


def asked(rng: random.Random, texts: list[str]) -> list[str]:
    """Each text with a third of its words left out; a text's words in another order; serials alone."""
    questions = []
    for text in texts:
        words = text.split()
        kept = [word for word in words if rng.random() > 1 / 3] or words[:1]
        questions.append(" ".join(kept))
        questions.append(" ".join(rng.sample(words, len(words))))
        questions += [word for word in words if word.startswith("sn")]
    return questions


@pytest.mark.parametrize("fts5", [True, False], ids=["fts5-where-cheaper", "text-always"])
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_hybrid_recall_returns_what_fusing_every_candidate_returns(
    store: MemoryStore, seed: int, fts5: bool
) -> None:
    rng = random.Random(seed)
    texts = await fill(store, corpus(rng, 160))
    await fill(store, corpus(rng, 40), agent="bob")  # counted in the index, never recalled for nexo
    recaller = Recaller(store, _embedded, keyword_probe=PROBE, keyword_fts5=fts5)
    compared = lookups = common = 0
    for question in asked(rng, list(texts.values())[:40]):
        query = await keyword_query(question, store.term_documents, probe=PROBE)
        assert query is not None
        common += query.window is not None
        recalled = await recaller.recall("nexo", question, mode="hybrid", limit=LIMIT, touch=False)
        expected = await brute_force(store, texts, question, fts5=fts5)
        assert [memory.id for memory in recalled.memories] == expected, question
        compared += 1
        lookups += _is_lookup(query, texts, expected)
    # The comparison covered many questions, exact lookups and questions of common words among them.
    assert compared > 70
    assert lookups > 3
    assert common > 3


async def test_past_the_cap_only_the_candidates_near_enough_in_cosine_are_read(store: MemoryStore) -> None:
    """300 memories hold the question's one rare word, any of them could be a strong hit. With room
    for 20 in keyword recall's ranking, the text of those 20 is read, and of the others only those
    the vector side returned and those near enough in cosine to matter."""
    rng = random.Random(7)
    words = [f"w{k}" for k in range(40)]
    holding = [f"zephyr {' '.join(rng.sample(words, 5))}" for _ in range(300)]
    others = [" ".join(rng.sample(words, 6)) for _ in range(400)]
    texts = await fill(store, [*holding, *others])
    query = await keyword_query("zephyr", store.term_documents, probe=400)
    assert query is not None
    assert not fts5_is_cheaper(query, 20)  # 300 candidates: reading 20 costs less than FTS5's ranking
    recaller = Recaller(store, _embedded, keyword_probe=400, rank_cap=20)
    reads = store.reads
    assert isinstance(reads, CountingReads)
    reads.texts = 0
    recalled = await recaller.recall("nexo", "zephyr", mode="hybrid", limit=LIMIT, touch=False)
    assert [m.id for m in recalled.memories] == await brute_force(store, texts, "zephyr", probe=400, cap=20)
    assert 20 < reads.texts <= 20 + 2 * max(2 * LIMIT, MIN_NEIGHBOURS)


async def test_where_fts5_ranks_for_less_no_text_is_read(store: MemoryStore) -> None:
    """A few memories hold the question's rare word: FTS5 scores them, and finds the one holding
    every term, without a memory's text read."""
    rng = random.Random(8)
    words = [f"w{k}" for k in range(40)]
    texts = await fill(store, [f"zephyr {' '.join(rng.sample(words, 5))}" for _ in range(6)] + words)
    query = await keyword_query("zephyr w3", store.term_documents, probe=10)
    assert query is not None
    assert fts5_is_cheaper(query, RANK_CAP)
    reads = store.reads
    assert isinstance(reads, CountingReads)
    reads.texts = 0
    recaller = Recaller(store, _embedded, keyword_probe=10)
    recalled = await recaller.recall("nexo", "zephyr w3", mode="hybrid", limit=LIMIT, touch=False)
    assert [m.id for m in recalled.memories] == await brute_force(store, texts, "zephyr w3", probe=10)
    assert reads.texts == 0


@pytest.mark.parametrize("seed", [4, 5])
async def test_with_a_small_cap_hybrid_recall_still_returns_what_fusing_every_candidate_returns(
    store: MemoryStore, seed: int
) -> None:
    """Most candidates past the cap: they are read only where their cosine could matter, and
    keyword recall's best strong hits are those of the first candidates."""
    rng = random.Random(seed)
    texts = await fill(store, corpus(rng, 160))
    recaller = Recaller(store, _embedded, keyword_probe=PROBE, rank_cap=3, keyword_fts5=False)
    compared = 0
    for question in asked(rng, list(texts.values())[:30]):
        recalled = await recaller.recall("nexo", question, mode="hybrid", limit=LIMIT, touch=False)
        expected = await brute_force(store, texts, question, cap=3, fts5=False)
        assert [memory.id for memory in recalled.memories] == expected, question
        compared += 1
    assert compared > 50


@pytest.mark.parametrize("limit", [1, 3, 4, 7, 8, 10, 40])
def test_keyword_recalls_best_keep_the_last_places_never_the_first(limit: int) -> None:
    fused = list(range(100, 100 + 2 * limit))
    best = [7, 8]
    places = keyword_places(limit)
    assert places == min(2, limit // 4)
    kept = with_places_kept(fused, best[:places], limit)
    assert len(kept) == limit
    assert kept[0] == 100
    assert kept[limit - places :] == best[:places]
    assert kept[: limit - places] == fused[: limit - places]
    # Already among the results: each stays where the fusion put it.
    assert with_places_kept([100, 8, 101, 102, 103], [7, 8], 5) == [100, 8, 101, 102, 7]
    # Fewer results than places to fill: nothing is dropped.
    assert with_places_kept([100, 101], [7, 8], 5) == [100, 101, 7, 8]


async def _embedded(text: str) -> np.ndarray:
    return embedding(text)


@cache
def _split(text: str) -> tuple[str, ...]:
    return tuple(document_tokens(text, "[]"))


def _words(text: str) -> list[str]:
    """The words of a memory's text as its full-text entry holds them (split once per text)."""
    return list(_split(text))


def _holds(terms: tuple[Weighted, ...], text: str) -> bool:
    """Whether the text holds one of the terms."""
    return any(frequency(w.term, _words(text)) for w in terms)


def _is_lookup(query: KeywordQuery, texts: dict[int, str], expected: list[int]) -> bool:
    """Whether exactly one memory holds every term of the query, and it came first."""
    holding = [
        memory_id
        for memory_id, text in texts.items()
        if all(frequency(w.term, _words(text)) for w, _ in query.scored)
    ]
    return len(holding) == 1 and expected[:1] == holding
