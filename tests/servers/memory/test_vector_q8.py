"""The int8 copies of the memory vectors: they bound every cosine, follow every write, are built for
a store of the previous version, and spare the rerank most of its float32 reads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from servers.memory import vector_q8
from servers.memory.models import NewMemory
from servers.memory.state import MIGRATIONS
from servers.memory.store import MemoryStore
from servers.memory.vector_codes import sign_codes, unit_matrix
from servers.memory.vector_search import rerank_rows
from servers.memory.vectors import VectorIndex
from shared.db import Database
from tests.servers.memory.conftest import open_store

pytestmark = pytest.mark.anyio

DIM = 32


def vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((8, DIM))
    return np.asarray(centres[rng.integers(8, size=n)] + 0.4 * rng.standard_normal((n, DIM)), np.float32)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    async with open_store(tmp_path / "memory.db", DIM) as opened:
        yield opened


async def assert_in_step(db: Database) -> None:
    """Every float32 vector has its int8 copy (and no other row has one), whose bound holds."""
    floats = await db.fetchall("SELECT memory_id, agent, embedding FROM memory_vectors ORDER BY memory_id")
    copies = await db.fetchall(
        "SELECT memory_id, agent, scale, error, q FROM memory_vectors_q8 ORDER BY memory_id"
    )
    assert [(i, agent) for i, agent, *_ in copies] == [(i, agent) for i, agent, _ in floats]
    if not floats:
        return
    exact = np.frombuffer(b"".join(row[2] for row in floats), dtype=np.float32).reshape(len(floats), DIM)
    q = np.frombuffer(b"".join(row[4] for row in copies), dtype=np.int8).reshape(len(copies), DIM)
    scale = np.array([row[2] for row in copies])
    error = np.array([row[3] for row in copies])
    asked = unit_matrix(list(vectors(50, 99)), DIM, lambda i: f"query {i}")
    for query in asked:
        estimate = (q.astype(np.float32) @ query) * scale
        assert np.all(np.abs(exact @ query - estimate) <= error)
    assert float(error.max()) < 0.05  # a bound that prunes: int8 rounding loses little


def new(content: str, agent: str = "nexo") -> NewMemory:
    return NewMemory(agent, content, (), "fact", "owner", 0.5)


async def test_the_int8_copies_bound_every_cosine_and_follow_every_write(store: MemoryStore) -> None:
    data = vectors(60, 1)
    stored = await store.add_many([(new(f"memory {i}"), data[i]) for i in range(50)])  # an import
    await store.add(new("bob's", agent="bob"), data[50])
    await assert_in_step(store.db)
    ids = [item.memory.id for item in stored]
    await store.forget(ids[3])
    await store.set_archived(ids[10:20], True)
    async with store.db.transaction() as tx:  # the same memory's vector written again
        await store.index.add(tx, ids[4], "nexo", data[55])
    await assert_in_step(store.db)

    async def abandoned() -> None:
        async with store.db.transaction() as tx:
            await store.index.add_many(tx, [(ids[5], "nexo", data[56]), (999, "nexo", data[57])])
            await store.index.remove(tx, ids[6])
            raise RuntimeError("abandoned")

    with pytest.raises(RuntimeError, match="abandoned"):
        await abandoned()
    await assert_in_step(store.db)
    async with store.db.transaction() as tx:
        await store.index.clear(tx)
    await assert_in_step(store.db)
    assert await store.db.fetchone("SELECT count(*) FROM memory_vectors_q8") == (0,)


async def test_a_store_of_the_previous_version_gets_its_int8_copies_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    before = tuple(m for m in MIGRATIONS if m.name != "vectors_0002_memory_vectors_q8")
    data = unit_matrix(list(vectors(300, 2)), DIM, lambda i: f"vector {i}")
    async with Database.open(path, before, load_vec=True) as db:
        # As the previous version wrote them: the float32 vector and its sign code, nothing else.
        await db.executemany(
            "INSERT INTO memory_vectors(memory_id, agent, code, embedding) VALUES (?, ?, ?, ?)",
            [
                (i + 1, "nexo", code.tobytes(), vector.tobytes())
                for i, (code, vector) in enumerate(zip(sign_codes(data), data, strict=True))
            ],
        )
        assert await db.fetchone("SELECT count(*) FROM sqlite_master WHERE name = 'memory_vectors_q8'") == (
            0,
        )
    async with Database.open(path, MIGRATIONS, load_vec=True) as db:
        await assert_in_step(db)
        index = VectorIndex(db, DIM)
        await index.load()
        for query in data[:20]:
            found = await index.search("nexo", query, 10)
            exact = await index.search("nexo", query, 10, exact=True)
            assert [i for i, _ in found] == [i for i, _ in exact]


async def test_a_rerank_reads_the_float32_vectors_of_only_the_rows_that_may_be_nearest(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = vectors(2_000, 3)
    await store.add_many([(new(f"memory {i}"), data[i]) for i in range(len(data))])
    read: list[int] = []
    fetchall = Database.fetchall

    async def counted(self: Database, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        rows = await fetchall(self, sql, params)
        if sql.startswith("SELECT memory_id, embedding FROM memory_vectors WHERE memory_id IN"):
            read.append(len(rows))
        return rows

    asked = vectors(10, 4)
    with monkeypatch.context() as every_float:  # the rerank of before: every candidate's float32 vector
        every_float.setattr(
            vector_q8, "possible_nearest", lambda estimate, error, k: np.arange(estimate.size)
        )
        before = [await store.index.search("nexo", query, 10) for query in asked]
    monkeypatch.setattr(Database, "fetchall", counted)
    after = [await store.index.search("nexo", query, 10) for query in asked]
    assert [[i for i, _ in hits] for hits in after] == [[i for i, _ in hits] for hits in before]
    distances = [d for hits in after for _, d in hits]
    assert distances == pytest.approx([d for hits in before for _, d in hits], abs=1e-6)
    assert sum(read) < len(asked) * rerank_rows(len(data), 10) / 4
