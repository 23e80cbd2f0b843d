"""Keyword recall's own BM25 and the word counts it reads: right against FTS5's own figures and a
brute-force BM25, and kept right by every write."""

from __future__ import annotations

import math
import re
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from servers.memory.keyword import KeywordQuery, Term, Weighted, keyword_query
from servers.memory.keyword_rank import RANK_CAP, fts5_is_cheaper, idf, ranked
from servers.memory.memory_rows import INSERT, insert_row
from servers.memory.models import NewMemory, content_hash
from servers.memory.recall import STRONG_SHARE
from servers.memory.state import MIGRATIONS
from servers.memory.store import MemoryStore
from servers.memory.terms import TERM_MIGRATIONS, tokens
from servers.memory.vectors import VectorDimensionError
from shared.db import Database
from tests.servers.memory.conftest import open_store

pytestmark = pytest.mark.anyio

DIM = 8
CORPUS = (
    "the garden shed holds the ladder and the mower",
    "Ana keeps the kayak in the garden",
    "the kayak paddle is blue and the kayak is red",
    "Bob repaired the mower blade last spring",
    "a ladder leans on the shed in the garden of the garden house",
    "the blue kettle whistles in the kitchen",
    "Ana's passport is in the kitchen drawer",
    "garden garden garden: the word said three times",
)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    async with open_store(tmp_path / "memory.db", DIM) as opened:
        yield opened


def new(content: str, tags: tuple[str, ...] = (), agent: str = "nexo") -> NewMemory:
    return NewMemory(agent, content, tags, "fact", "owner", 0.5)


def vector(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


async def remember(store: MemoryStore, *texts: str) -> list[int]:
    stored = await store.add_many([(new(text), vector(n)) for n, text in enumerate(texts)])
    return [item.memory.id for item in stored]


async def counted(db: Database) -> dict[str, int]:
    """The side table's word counts."""
    rows = await db.fetchall("SELECT term, documents FROM memory_terms")
    return {str(term): int(n) for term, n in rows}


async def indexed(db: Database) -> dict[str, int]:
    """How many memories hold each word, as the full-text index itself counts (fts5vocab)."""
    await db.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocabulary USING fts5vocab(main, memories_fts, row)"
    )
    rows = await db.fetchall("SELECT term, doc FROM temp.vocabulary")
    return {str(term): int(n) for term, n in rows}


def brute_force_bm25(texts: dict[int, str], weighted: dict[str, float]) -> dict[int, float]:
    """BM25 written out from its definition, FTS5's constants, every text's words counted here."""
    words = {i: re.findall(r"[a-z0-9]+", text.lower() + " []") for i, text in texts.items()}
    n = len(texts)
    average = sum(map(len, words.values())) / n
    scores: dict[int, float] = {}
    for memory_id, held in words.items():
        score = 0.0
        for word, factor in weighted.items():
            matching = sum(word in other for other in words.values())
            idf = max(math.log((n - matching + 0.5) / (matching + 0.5)), 1e-6)
            tf = held.count(word)
            score += factor * idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(held) / average))
        if any(word in held for word in weighted):
            scores[memory_id] = score
    return scores


async def test_a_question_of_rare_words_scores_as_fts5s_own_bm25(store: MemoryStore) -> None:
    await remember(store, *CORPUS)
    query = await keyword_query("ladder kayak passport", store.term_documents)
    assert query is not None
    assert query.ranking == ()
    ours = (await ranked(store.db, "nexo", query, 10, allow_fts5=False)).hits
    fts5 = await store.db.fetchall(
        "SELECT rowid, -bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ?",
        ('"ladder" OR "kayak" OR "passport"',),
    )
    assert dict(ours) == pytest.approx(dict(fts5), rel=1e-9)
    assert len(fts5) == 5
    assert [memory_id for memory_id, _ in ours] == [
        i for i, _ in sorted(fts5, key=lambda hit: (-hit[1], -hit[0]))
    ]


async def test_rare_and_common_words_score_as_a_brute_force_bm25_with_the_rare_ones_counted_twice(
    store: MemoryStore,
) -> None:
    ids = await remember(store, *CORPUS)
    query = await keyword_query("the kayak in the garden, blue", store.term_documents, probe=3)
    assert query is not None
    assert [w.term.words for w in query.terms] == [("kayak",), ("blue",)]
    assert [w.term.words for w in query.ranking] == [("garden",)]
    expected = brute_force_bm25(dict(zip(ids, CORPUS, strict=True)), {"blue": 2, "kayak": 2, "garden": 1})
    ours = (await ranked(store.db, "nexo", query, 10, allow_fts5=False)).hits
    by_fts5 = (await ranked(store.db, "nexo", query, 10)).hits
    assert [i for i, _ in by_fts5] == [i for i, _ in ours]
    assert dict(by_fts5) == pytest.approx(dict(ours), rel=1e-9)
    # Only the holders of a rare word are candidates; the common one ranks them.
    assert dict(ours) == pytest.approx({i: s for i, s in expected.items() if i in {2, 3, 6}}, rel=1e-9)
    assert [memory_id for memory_id, _ in ours] == sorted(dict(ours), key=lambda i: -dict(ours)[i])
    assert ours[0][0] == 3  # both rare words, one of them twice


async def test_only_the_best_candidates_by_their_rare_words_are_read_and_scored(store: MemoryStore) -> None:
    ids = await remember(store, "zephyr quokka", *(f"quokka note {n}" for n in range(30)))
    query = KeywordQuery(
        tuple((await keyword_query("zephyr quokka", store.term_documents)).terms)  # type: ignore[union-attr]
    )
    found = (await ranked(store.db, "nexo", query, 5, cap=5, allow_fts5=False)).hits
    # The one holding both rare words first, then the newest holders of one, as many as the cap.
    assert [memory_id for memory_id, _ in found] == [ids[0], *ids[-1:-5:-1]]


async def test_the_word_counts_follow_every_write_and_match_the_index(store: MemoryStore) -> None:
    await remember(store, *CORPUS)
    assert await counted(store.db) == await indexed(store.db)
    assert (await counted(store.db))["kayak"] == 2
    twin = await store.add(new(CORPUS[1], tags=("boats", "garden")), vector(1))
    assert not twin.created
    assert (await counted(store.db))["boats"] == 1
    assert await counted(store.db) == await indexed(store.db)
    await store.refresh(twin.memory.id, tags=("boats",))
    assert (await counted(store.db))["boats"] == 1
    forgotten = await store.forget(twin.memory.id)
    assert forgotten is not None
    assert "boats" not in await counted(store.db)
    assert (await counted(store.db))["kayak"] == 1
    await store.set_archived([1, 2, 3], archived=True)
    await store.add(new("Café au lait at the café", agent="ana"), vector(9))
    assert (await counted(store.db))["cafe"] == 1
    assert await counted(store.db) == await indexed(store.db)


async def test_an_import_batch_counts_its_records_words_once_each(store: MemoryStore) -> None:
    """``nexo memory import`` stores a batch with ``add_many``, archived records and repeats included."""
    records = [
        NewMemory("nexo", text, ("imported",), "fact", "owner", 0.5, created_at=1.0, archived=True)
        for text in (*CORPUS[:4], CORPUS[0])
    ]
    await store.add_many([(record, vector(n)) for n, record in enumerate(records)])
    assert (await counted(store.db))["imported"] == 4
    assert await counted(store.db) == await indexed(store.db)


async def test_a_write_that_fails_half_way_leaves_the_counts_as_they_were(store: MemoryStore) -> None:
    await remember(store, *CORPUS)
    before = await counted(store.db)
    # The row and its word counts are written, then the vector is refused: all of it rolls back.
    with pytest.raises(VectorDimensionError, match="has shape"):
        await store.add(new("a zeppelin over the garden"), np.ones(3, dtype=np.float32))
    assert await counted(store.db) == before == await indexed(store.db)
    assert "zeppelin" not in before


async def test_a_store_of_the_previous_schema_gets_its_word_counts_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    previous = tuple(m for m in MIGRATIONS if m not in TERM_MIGRATIONS)
    async with Database.open(path, previous, load_vec=True) as db:
        await db.executemany(INSERT, [insert_row(new(text), content_hash(text), 1.0) for text in CORPUS])
    with sqlite3.connect(path) as conn:
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_terms'").fetchall()
    async with Database.open(path, MIGRATIONS, load_vec=True) as db:
        words = await counted(db)
        assert words == await indexed(db)
    assert Counter(words)["garden"] == 4
    assert words["the"] == 8


async def test_a_phrase_or_a_prefix_scores_by_its_occurrences(store: MemoryStore) -> None:
    ids = await remember(store, "the parcel SN-4411-B arrived", "SN 4411 and B, then SN-4411-B again")
    phrase = await keyword_query("SN-4411-B", store.term_documents)
    assert phrase is not None
    scores = dict((await ranked(store.db, "nexo", phrase, 10)).hits)
    assert set(scores) == set(ids)
    prefix = KeywordQuery((await keyword_query("arriv", store.term_documents)).terms)  # type: ignore[union-attr]
    assert [w.term for w in prefix.terms] == [Term(("arriv",), prefix=True)]
    assert [memory_id for memory_id, _ in (await ranked(store.db, "nexo", prefix, 10)).hits] == [ids[0]]


async def test_the_memories_holding_every_term_are_known_when_every_candidate_was_read(
    store: MemoryStore,
) -> None:
    ids = await remember(store, *CORPUS)
    query = await keyword_query("kayak garden", store.term_documents, probe=3)
    assert query is not None
    assert (await ranked(store.db, "nexo", query, 10, allow_fts5=False)).whole == [ids[1]]
    # One of the two holders of "kayak" read: whether the other holds "garden" too is not known.
    assert (await ranked(store.db, "nexo", query, 1, cap=1, allow_fts5=False)).whole is None
    # FTS5's bm25(), cheaper on a store this small, reads no text: nothing is known.
    assert (await ranked(store.db, "nexo", query, 10)).whole is None
    common = await keyword_query("the garden", store.term_documents, probe=3, cap=10)
    assert common is not None
    assert common.window == 10
    assert sorted((await ranked(store.db, "nexo", common, 10)).whole or []) == [
        ids[0],
        ids[1],
        ids[4],
        ids[7],
    ]
    assert (await ranked(store.db, "nexo", KeywordQuery(common.terms, window=3), 10)).whole is None


def test_fts5_ranks_while_counting_the_terms_costs_less_than_reading_the_candidates() -> None:
    def query(rare: int, common: int) -> KeywordQuery:
        return KeywordQuery(
            (Weighted(Term(("rare",)), rare),),
            ranking=tuple(Weighted(Term((f"c{n}",)), common) for n in range(6)),
        )

    # A few candidates in a small store, then a rare word's holders and six common words at 100,000
    # memories, then at a million.
    assert fts5_is_cheaper(query(5, 200), RANK_CAP)
    assert fts5_is_cheaper(query(800, 8_000), RANK_CAP)
    assert not fts5_is_cheaper(query(800, 80_000), RANK_CAP)


def test_ascii_and_other_text_split_into_the_words_the_index_holds() -> None:
    assert tokens("Ana's SN-4411-B, e_mail v2.3") == ["ana", "s", "sn", "4411", "b", "e", "mail", "v2", "3"]
    assert tokens("Café ÉCOLE naïve_x") == ["cafe", "ecole", "naive", "x"]


async def test_ranking_for_strong_hits_only_reads_fewer_texts_and_loses_none_of_them(
    store: MemoryStore,
) -> None:
    """``least``: the hits scoring that share of the total weight are exactly those of a full ranking."""
    rng = np.random.default_rng(5)
    vocabulary = [f"w{n}" for n in range(80)]
    # Zipf-like: a few words in many texts, most in a few.
    odds = 1 / np.arange(1, len(vocabulary) + 1)
    texts = [
        " ".join(rng.choice(vocabulary, size=int(rng.integers(3, 14)), p=odds / odds.sum()))
        for _ in range(400)
    ]
    await remember(store, *dict.fromkeys(texts))
    indexed_rows = await store.indexed()
    pruned_some = 0
    for _ in range(60):
        question = " ".join(rng.choice(vocabulary, size=int(rng.integers(2, 10))))
        query = await keyword_query(question, store.term_documents, probe=40)
        assert query is not None
        if query.window is not None:
            continue
        total = query.weight(lambda matching: idf(indexed_rows, matching))
        full = await ranked(store.db, "nexo", query, 1_000, allow_fts5=False)
        strong = await ranked(store.db, "nexo", query, 1_000, allow_fts5=False, least=STRONG_SHARE)
        assert [hit for hit in strong.hits if hit[1] >= STRONG_SHARE * total] == [
            hit for hit in full.hits if hit[1] >= STRONG_SHARE * total
        ], question
        if strong.whole is not None and full.whole is not None:
            assert strong.whole == full.whole
        pruned_some += len(strong.hits) < len(full.hits)
    assert pruned_some >= 10
