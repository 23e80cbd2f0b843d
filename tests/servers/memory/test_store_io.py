"""What the store sends to SQLite: a recall writes nothing, an import batch takes a few statements,
and a full-text lookup walks the index, not the agent's memories."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from servers.memory import vector_q8
from servers.memory.keyword import Term, keyword_query
from servers.memory.keyword_rank import ranked
from servers.memory.models import NewMemory
from servers.memory.recall import Recaller
from servers.memory.settings import MemorySettings
from servers.memory.state import open_service
from servers.memory.store import MemoryStore
from shared.db import Database, Transaction
from tests.servers.memory.conftest import START, Clock, open_store

pytestmark = pytest.mark.anyio

DIM = 8


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    async with open_store(tmp_path / "memory.db", DIM) as opened:
        yield opened


def new(content: str, agent: str = "nexo", tags: tuple[str, ...] = ("t",)) -> NewMemory:
    return NewMemory(agent=agent, content=content, tags=tags, kind="fact", provenance="owner", importance=0.5)


def vector(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


def stored_access(path: Path) -> dict[int, tuple[int, float]]:
    """(access count, last access) of every memory, read by a connection of its own."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT id, access_count, last_accessed_at FROM memories").fetchall()
    return {int(memory_id): (int(count), float(last)) for memory_id, count, last in rows}


async def test_a_recall_writes_nothing_until_the_accesses_are_flushed_in_one_batch(
    store: MemoryStore,
) -> None:
    ids = [
        (await store.add(new(f"Ana keeps the {thing} in the shed"), vector(i))).memory.id
        for i, thing in enumerate(("ladder", "mower", "kayak"))
    ]
    recaller = Recaller(store, lambda _: _never())
    for _ in range(3):
        assert [
            m.id for m in (await recaller.recall("nexo", "ladder", mode="keyword", limit=1)).memories
        ] == [ids[0]]
    await recaller.recall("nexo", "kayak", mode="keyword", limit=1)
    assert stored_access(store.db.path) == dict.fromkeys(ids, (0, START))
    assert await store.flush_access() == 2
    assert stored_access(store.db.path) == {ids[0]: (3, START), ids[1]: (0, START), ids[2]: (1, START)}
    assert await store.flush_access() == 0


async def _never() -> np.ndarray:
    raise AssertionError("a keyword recall embeds nothing")


async def test_the_server_writes_the_noted_accesses_when_it_stops(tmp_path: Path) -> None:
    settings = MemorySettings.model_validate({"state_dir": tmp_path, "access_flush_s": 3600})
    async with open_service(settings, embedder=_FixedEmbedder(), clock=Clock()) as service:
        stored = await service.remember("nexo", "owner", "The spare key is under the blue pot")
        await service.recall("nexo", "spare key", mode="keyword")
        assert stored_access(settings.database) == {stored.memory.id: (0, START)}
    assert stored_access(settings.database) == {stored.memory.id: (1, START)}


class _FixedEmbedder:
    """An embedder edge that needs no model: every text gets the same direction."""

    model_id = "fixed-test-embedder"
    dim = DIM

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), DIM), dtype=np.float32)


async def test_an_import_batch_is_a_few_statements_and_stores_what_one_by_one_adds_would(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.add(new("Bob likes coffee", tags=("old",)), vector(0))
    batch = [(new(f"Fact number {i} about the garden"), vector(i + 1)) for i in range(50)]
    batch += [
        (new("Bob likes coffee", tags=("new",)), vector(99)),
        (new("Fact number 3 about the garden"), vector(4)),
    ]
    statements = 0
    for method in ("execute", "fetchall", "fetchone", "insert", "executemany"):
        original = getattr(Transaction, method)

        async def counted(self: Transaction, *args: Any, _original: Any = original) -> Any:
            nonlocal statements
            statements += 1
            return await _original(self, *args)

        monkeypatch.setattr(Transaction, method, counted)
    stored = await store.add_many(batch)
    monkeypatch.undo()
    # Twin lookup, insert, word counts, ids, vectors and their int8 copies, rows read back; then 3
    # per refreshed twin (2 here), and the words of the one that gained a tag counted.
    assert statements <= 7 + 3 * 2 + 1
    assert [s.created for s in stored] == [True] * 50 + [False, False]
    assert [s.memory.content for s in stored] == [new.content for new, _ in batch]
    assert stored[50].memory.tags == ("old", "new")
    assert stored[51].memory.id == stored[3].memory.id
    assert stored[51].memory.access_count == 1
    assert len({s.memory.id for s in stored}) == 51
    found = await store.index.search("nexo", vector(11), 1, exact=True)
    assert [memory_id for memory_id, _ in found] == [stored[10].memory.id]
    garden = await keyword_query("garden", store.term_documents)
    assert garden is not None
    assert len((await store.keyword("nexo", garden, 100)).hits) == 50
    assert await store.count() == 51


async def test_lookups_by_id_or_by_words_never_walk_every_memory_of_the_agent(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each starts from the ids or the full-text index; through the agent's index entries, SQLite
    read all of them first (150 ms for ten memories by id at a million)."""
    ids = [(await store.add(new(f"Ana prefers green tea number {i}"), vector(i))).memory.id for i in range(3)]
    asked: list[tuple[str, Any]] = []
    fetchall = Database.fetchall

    async def recorded(self: Database, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        asked.append((sql, params))
        return await fetchall(self, sql, params)

    green = await keyword_query("green", store.term_documents)
    assert green is not None
    monkeypatch.setattr(Database, "fetchall", recorded)
    assert await store.holders("nexo", '"green"', 2) != []
    assert (await store.keyword("nexo", green, 2)).hits != []
    assert (await ranked(store.db, "nexo", green, 2, allow_fts5=False)).hits != []
    assert set(await store.by_ids("nexo", ids)) == set(ids)
    assert set(await store.similarities("nexo", vector(0), ids)) == set(ids)
    assert set(await store.ceilings("nexo", vector(0), ids)) == set(ids)
    # Those two read the int8 copies from the agent's file (vector_file); without one, from SQLite.
    found, _, _ = await vector_q8.bounds(store.db, "nexo", vector(0), np.array(ids, dtype=np.int64))
    assert sorted(found.tolist()) == sorted(ids)
    monkeypatch.undo()
    assert len(asked) == 7
    plans = [
        [str(step[3]) for step in await store.db.fetchall("EXPLAIN QUERY PLAN " + sql, params)]
        for sql, params in asked
    ]
    # Asked of the standard library's SQLite too: 3.40 plans the joins the agent's rows first
    # unless the statement says otherwise.
    with sqlite3.connect(store.db.path) as conn:
        plans += [
            [str(step[3]) for step in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
            for sql, params in asked
        ]
    reads = [
        step
        for plan in plans
        for step in plan
        if step.startswith(("SCAN", "SEARCH"))
        and not step.startswith(("SCAN memories_fts", "SCAN json_each"))
    ]
    assert reads, plans
    assert all("INTEGER PRIMARY KEY" in step for step in reads), plans


async def test_hybrid_recall_searches_its_keyword_and_vector_sides_at_the_same_time(
    store: MemoryStore,
) -> None:
    """The keyword side waits until the query is embedded: one side after the other, it never would be."""
    shed = (await store.add(new("Ana keeps the ladder in the shed"), vector(1))).memory.id
    embedded = anyio.Event()
    term_documents = store.term_documents

    async def counted_once_embedded(terms: Sequence[Term], at_most: int) -> list[int]:
        await embedded.wait()
        return await term_documents(terms, at_most)

    async def embed(_: str) -> np.ndarray:
        embedded.set()
        return vector(1)

    store.term_documents = counted_once_embedded  # type: ignore[method-assign]
    with anyio.fail_after(5):
        recalled = await Recaller(store, embed).recall("nexo", "ladder", mode="hybrid", limit=1)
    assert ([m.id for m in recalled.memories], recalled.mode) == ([shed], "hybrid")
