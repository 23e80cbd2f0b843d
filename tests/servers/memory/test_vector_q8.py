"""The int8 copies of the memory vectors: they bound every cosine, follow every write, are built for
a store of the previous version once it is open (the same answers meanwhile), and spare the rerank
most of its float32 reads."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from servers.memory import vector_q8
from servers.memory.embeddings import Embedder
from servers.memory.models import NewMemory
from servers.memory.service import MemoryService
from servers.memory.settings import MemorySettings
from servers.memory.state import MIGRATIONS, open_service
from servers.memory.store import MemoryStore
from servers.memory.vector_codes import sign_codes, unit_matrix
from servers.memory.vector_search import rerank_rows
from servers.memory.vectors import VectorIndex, backfill_pending
from shared.db import Database
from shared.protocol.memory.records import ImportRecord
from tests.servers.memory.conftest import Clock, open_store, rolled_back

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
    assert not await backfill_pending(store.db)  # a new store has nothing to build
    await assert_in_step(store.db)
    ids = [item.memory.id for item in stored]
    await store.forget(ids[3])
    await store.set_archived(ids[10:20], True)
    async with store.db.transaction() as tx:  # the same memory's vector written again
        await store.index.add(tx, ids[4], "nexo", data[55])
    await assert_in_step(store.db)

    await rolled_back(store, [(ids[5], "nexo", data[56]), (999, "nexo", data[57])], ids[6])
    await assert_in_step(store.db)
    async with store.db.transaction() as tx:
        await store.index.clear(tx)
    await assert_in_step(store.db)
    assert await store.db.fetchone("SELECT count(*) FROM memory_vectors_q8") == (0,)


async def old_store(path: Path, data: np.ndarray) -> None:
    """A store as the previous version left it: float32 vectors and sign codes, no int8 copies."""
    before = tuple(m for m in MIGRATIONS if m.name != "vectors_0002_memory_vectors_q8")
    async with Database.open(path, before, load_vec=True) as db:
        await db.executemany(
            "INSERT INTO memory_vectors(memory_id, agent, code, embedding) VALUES (?, ?, ?, ?)",
            [
                (i + 1, "nexo", code.tobytes(), vector.tobytes())
                for i, (code, vector) in enumerate(zip(sign_codes(data), data, strict=True))
            ],
        )


async def test_a_store_of_the_previous_version_opens_at_once_and_answers_the_same_before_its_copies_are_built(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.db"
    data = unit_matrix(list(vectors(2_000, 2)), DIM, lambda i: f"vector {i}")
    fresh = unit_matrix(list(vectors(2, 9)), DIM, lambda i: f"fresh vector {i}")
    await old_store(path, data)
    async with Database.open(path, MIGRATIONS, load_vec=True) as db:
        # Opening builds nothing: the handshake of a large store is not held up by the copies.
        assert await db.fetchone("SELECT count(*) FROM memory_vectors_q8") == (0,)
        assert await backfill_pending(db)
        index = VectorIndex(db, DIM)
        await index.load()
        assert len(data) > rerank_rows(len(data), 10)  # searched through the codes and a rerank
        ceilings = await index.ceilings("nexo", data[0], [1, 2, 3])
        assert ceilings == {1: vector_q8.UNBOUNDED, 2: vector_q8.UNBOUNDED, 3: vector_q8.UNBOUNDED}
        # Written meanwhile: a new vector and a new value of an old one, each with its copy.
        async with db.transaction() as tx:
            await index.add_many(tx, [(5, "nexo", fresh[0]), (2001, "nexo", fresh[1])])
        asked = [*data[:20], *fresh]
        before = [await index.search("nexo", query, 10) for query in asked]
        assert (before[-2][0][0], before[-1][0][0]) == (5, 2001)
        assert await vector_q8.backfill(db, chunk=300) == 2_001  # 2001 is past where it began
        await assert_in_step(db)
        assert not await backfill_pending(db)
        assert await vector_q8.backfill(db) == 0
        after = [await index.search("nexo", query, 10) for query in asked]
        assert [[i for i, _ in hits] for hits in after] == [[i for i, _ in hits] for hits in before]
        distances = [d for hits in after for _, d in hits]
        assert distances == pytest.approx([d for hits in before for _, d in hits], abs=1e-6)
        assert (await index.ceilings("nexo", data[0], [1]))[1] != vector_q8.UNBOUNDED


async def test_building_the_copies_resumes_where_a_failed_transaction_left_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "memory.db"
    await old_store(path, unit_matrix(list(vectors(250, 5)), DIM, lambda i: f"vector {i}"))
    rows = vector_q8.rows
    calls: list[int] = []

    def full_disk_on_the_second_chunk(ids: np.ndarray, agents: list[str], copies: Any) -> list[Any]:
        calls.append(ids.size)
        if len(calls) == 2:
            raise sqlite3.OperationalError("database or disk is full")
        return rows(ids, agents, copies)

    async with Database.open(path, MIGRATIONS, load_vec=True) as db:
        monkeypatch.setattr(vector_q8, "rows", full_disk_on_the_second_chunk)
        with pytest.raises(sqlite3.OperationalError, match="disk is full"):
            await vector_q8.backfill(db, chunk=100)
        assert await db.fetchone("SELECT count(*), max(memory_id) FROM memory_vectors_q8") == (100, 100)
        assert await db.fetchone("SELECT after FROM memory_vectors_q8_backfill") == (100,)
        monkeypatch.setattr(vector_q8, "rows", rows)
        assert await vector_q8.backfill(db, chunk=100) == 150
        await assert_in_step(db)


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


async def test_the_memory_server_answers_the_same_while_it_builds_the_copies_of_a_previous_versions_store(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = MemorySettings(state_dir=tmp_path / "state")
    colours = ["red", "blue", "green", "yellow", "black"]
    things = ["kayak", "paddle", "tent", "stove", "map", "rope", "lamp", "boots"]
    records = [
        ImportRecord(agent="nexo", content=f"the {c} {t} is in the shed") for c in colours for t in things
    ]
    modes = ("keyword", "hybrid", "vector")

    async def answers(service: MemoryService) -> dict[str, list[int]]:
        found = {}
        for mode in modes:
            recalled = await service.recall("nexo", "red kayak", mode=mode, limit=10, touch=False)
            found[mode] = [memory.id for memory in recalled.memories]
        return found

    async with open_service(settings, embedder=embedder, clock=Clock()) as service:
        await service.import_records(records)
        expected = await answers(service)
    async with Database.open(settings.database, MIGRATIONS, load_vec=True) as db:
        # As the previous version left it: no copies, all of them still to build.
        await db.execute("DELETE FROM memory_vectors_q8")
        await db.execute("INSERT INTO memory_vectors_q8_backfill(after) VALUES (-9223372036854775808)")
    gate, built = anyio.Event(), anyio.Event()
    keep_backfilling = vector_q8.keep_backfilling

    async def held(db: Database) -> None:
        await gate.wait()
        await keep_backfilling(db)
        built.set()

    monkeypatch.setattr(vector_q8, "keep_backfilling", held)
    async with open_service(settings, embedder=embedder, clock=Clock()) as service:
        db = service.store.db
        assert await backfill_pending(db)  # up and answering before the copies exist
        assert await answers(service) == expected
        gate.set()
        with anyio.fail_after(30):
            await built.wait()
        assert not await backfill_pending(db)
        assert await db.fetchone("SELECT count(*) FROM memory_vectors_q8") == (len(records),)
        assert await answers(service) == expected


async def test_a_database_error_while_building_the_copies_is_logged_and_the_build_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "memory.db"
    await old_store(path, unit_matrix(list(vectors(120, 6)), DIM, lambda i: f"vector {i}"))
    backfill = vector_q8.backfill
    attempts: list[int] = []

    async def full_disk_once(db: Database) -> int:
        attempts.append(1)
        if len(attempts) == 1:
            raise sqlite3.OperationalError("database or disk is full")
        return await backfill(db)

    monkeypatch.setattr(vector_q8, "backfill", full_disk_once)
    monkeypatch.setattr(vector_q8, "BACKFILL_RETRY_S", 0.0)
    async with Database.open(path, MIGRATIONS, load_vec=True) as db:
        with anyio.fail_after(10):
            await vector_q8.keep_backfilling(db)
        await assert_in_step(db)
    assert len(attempts) == 2
    assert (
        "int8 copies of the memory vectors not built yet (database or disk is full); retrying" in caplog.text
    )
