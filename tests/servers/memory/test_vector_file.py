"""The int8 copies' file (``vector_file``): it holds what SQLite holds through every write, is
written anew when mostly stale, names nothing on disk, and a file that cannot be written leaves
recall to SQLite with one warning."""

from __future__ import annotations

import errno
import gc
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from servers.memory import vector_cache, vector_q8
from servers.memory.models import NewMemory
from servers.memory.state import MIGRATIONS
from servers.memory.store import MemoryStore
from servers.memory.vector_codes import unit_matrix
from servers.memory.vector_file import Q8File
from servers.memory.vectors import VectorIndex
from shared.db import Database
from tests.servers.memory.conftest import open_store, rolled_back

pytestmark = pytest.mark.anyio

DIM = 32
WAIT_S = 10.0


def vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((8, DIM))
    data = centres[rng.integers(8, size=n)] + 0.4 * rng.standard_normal((n, DIM))
    return unit_matrix(list(data.astype(np.float32)), DIM, lambda i: f"vector {i}")


def new(content: str, agent: str = "nexo") -> NewMemory:
    return NewMemory(agent, content, (), "fact", "owner", 0.5)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    """A store whose index keeps its copies in files, as the memory server's does."""
    async with open_store(tmp_path / "memory.db", DIM) as opened, anyio.create_task_group() as tg:
        tg.start_soon(opened.index.keep_filed)
        yield opened
        tg.cancel_scope.cancel()


async def all_filed(index: VectorIndex, agent: str) -> None:
    """Bounded: the files are written by a task of their own, a chunk at a time."""
    with anyio.fail_after(WAIT_S):
        await index.until_filed()
    assert index.filed(agent)[0] == index.filed(agent)[1] > 0


async def assert_same_bounds(index: VectorIndex, db: Database, agent: str) -> None:
    """What a search reads from the files equals what SQLite holds, for every vector of ``agent``."""
    ids = np.array(
        [
            row[0]
            for row in await db.fetchall(
                "SELECT memory_id FROM memory_vectors WHERE agent = ? ORDER BY memory_id", (agent,)
            )
        ],
        dtype=np.int64,
    )
    search = index._searcher()  # the bounds a search reads, against SQLite's
    block = search._cache.block(agent)
    assert block is not None
    snapshot = block.snapshot()
    # A search's candidates come with their positions in the snapshot they were found in.
    positions = np.random.default_rng(5).permutation(snapshot.ids.size)
    for query in vectors(5, 77):
        want = await vector_q8.bounds(db, agent, query, ids)
        wanted = np.argsort(want[0])
        # In another order the float32 products may round differently, by an ulp or so.
        for got, rounding in (
            (await search._bounds(db, agent, query, ids), 1e-12),
            (await search._bounds(db, agent, query, snapshot.ids[positions], (snapshot, positions)), 1e-6),
        ):
            order = np.argsort(got[0])
            assert got[0][order].tolist() == want[0][wanted].tolist()
            assert got[1][order] == pytest.approx(want[1][wanted], abs=rounding)
            assert got[2][order].tolist() == want[2][wanted].tolist()


async def test_the_file_holds_what_sqlite_holds_through_every_write(store: MemoryStore) -> None:
    data = vectors(400, 1)
    stored = await store.add_many([(new(f"memory {i}"), data[i]) for i in range(300)])
    ids = [item.memory.id for item in stored]
    await all_filed(store.index, "nexo")
    await assert_same_bounds(store.index, store.db, "nexo")

    await store.forget(ids[3])
    async with store.db.transaction() as tx:
        await store.index.add(tx, ids[4], "nexo", data[301])  # the same memory's vector again
        await store.index.add(tx, ids[5], "bob", data[302])  # moved to another agent
        await store.index.add_many(tx, [(10_001, "nexo", data[303]), (10_002, "carol", data[304])])

    await rolled_back(store, [(ids[6], "nexo", data[305]), (10_003, "nexo", data[306])], ids[7])
    await store.index.search("nexo", data[0], 10)  # checks the cache against SQLite after the rollback
    for agent in ("nexo", "bob", "carol"):
        await all_filed(store.index, agent)
        await assert_same_bounds(store.index, store.db, agent)
    assert store.index.filed("nexo") == (300 - 1 - 1 + 1, 300 - 1 - 1 + 1)


async def test_a_file_mostly_of_replaced_vectors_is_written_anew(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_cache, "FILE_SLACK", 0)
    data = vectors(300, 2)
    stored = await store.add_many([(new(f"memory {i}"), data[i]) for i in range(100)])
    await all_filed(store.index, "nexo")
    for seed in (3, 4, 5):
        again = vectors(100, seed)
        async with store.db.transaction() as tx:
            await store.index.add_many(tx, [(s.memory.id, "nexo", again[i]) for i, s in enumerate(stored)])
    # The third write found 300 records for 100 vectors: the file was given up, and is written
    # anew from SQLite (the vectors that write changed once a search has checked them).
    await store.index.search("nexo", again[0], 10)
    await all_filed(store.index, "nexo")
    block = store.index._searcher()._cache.block("nexo")  # the file's own count
    assert block is not None
    assert block.q8 is not None
    assert block.q8.records <= 200
    await assert_same_bounds(store.index, store.db, "nexo")


async def test_a_file_that_cannot_be_written_leaves_recall_to_sqlite_with_one_warning(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def full_disk(*_: Any) -> np.ndarray:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Q8File, "append", full_disk)
    data = vectors(400, 5)
    with caplog.at_level(logging.WARNING, logger="nexo.memory.vectors"):
        await store.add_many([(new(f"memory {i}"), data[i]) for i in range(300)])
        await store.add_many([(new(f"more {i}"), data[300 + i]) for i in range(50)])
    assert store.index.filed("nexo") == (350, 0)
    warnings = [r.getMessage() for r in caplog.records if "cannot be kept in a file" in r.getMessage()]
    assert len(warnings) == 1
    assert "No space left on device" in warnings[0]
    assert "until the memory server restarts" in warnings[0]
    for query in data[:20]:
        found = await store.index.search("nexo", query, 10)
        exact = await store.index.search("nexo", query, 10, exact=True)
        assert [i for i, _ in found] == [i for i, _ in exact]
        assert [d for _, d in found] == pytest.approx([d for _, d in exact], abs=1e-6)
    await assert_same_bounds(store.index, store.db, "nexo")


def test_the_file_has_no_name_and_closes_when_nothing_holds_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    q = rng.integers(-127, 128, size=(50, DIM), dtype=np.int8)
    scale, error = rng.random(50), rng.random(50)
    copies = Q8File(tmp_path, DIM)
    fd = copies._fd  # the descriptor itself is checked
    assert copies.append(q[:20], scale[:20], error[:20]).tolist() == list(range(20))
    assert copies.append(q[20:], scale[20:], error[20:]).tolist() == list(range(20, 50))
    order = rng.permutation(50)
    got_q, got_scale, got_error = copies.read(order)
    assert np.array_equal(got_q, q[order])
    assert got_scale.tolist() == scale[order].tolist()
    assert got_error.tolist() == error[order].tolist()
    assert list(tmp_path.iterdir()) == []
    assert os.fstat(fd).st_nlink == 0
    assert oct(os.fstat(fd).st_mode & 0o777) == oct(0o600)
    del copies
    gc.collect()
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)


async def test_copies_a_transaction_was_writing_while_the_file_was_read_are_taken_once_it_ends(
    tmp_path: Path,
) -> None:
    data = vectors(220, 8)
    async with Database.open(tmp_path / "memory.db", MIGRATIONS, load_vec=True) as db:
        index = VectorIndex(db, DIM)
        async with db.transaction() as tx:
            await index.add_many(tx, [(i, "nexo", data[i]) for i in range(1, 201)])
        await index.load()  # no file yet: the file task writes it from SQLite
        async with anyio.create_task_group() as tg:
            async with db.transaction() as tx:
                await index.add_many(tx, [(i, "nexo", data[200 + i]) for i in range(1, 11)])
                tg.start_soon(index.keep_filed)
                await anyio.wait_all_tasks_blocked()  # it asked for the rows while this was open
            with anyio.fail_after(WAIT_S):
                await index.until_filed()
            assert index.filed("nexo") == (200, 190)
            await index.search("nexo", data[0], 5)  # the ended transaction is checked: its copies filed
            assert index.filed("nexo") == (200, 200)
            await assert_same_bounds(index, db, "nexo")
            tg.cancel_scope.cancel()


async def test_a_fault_writing_the_file_is_logged_and_recall_goes_on_from_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_: Any) -> None:
        raise ValueError("a fault of the file's own code")

    monkeypatch.setattr(vector_cache.CodeCache, "_file_rows", broken)
    data = vectors(120, 9)
    async with Database.open(tmp_path / "memory.db", MIGRATIONS, load_vec=True) as db:
        index = VectorIndex(db, DIM)
        async with db.transaction() as tx:
            await index.add_many(tx, [(i, "nexo", data[i]) for i in range(1, 101)])
        await index.load()
        with caplog.at_level(logging.WARNING, logger="nexo.memory.vectors"), anyio.fail_after(WAIT_S):
            await index.keep_filed()  # returns: the files are given up, the server goes on
        assert index.filed("nexo") == (100, 0)
        found = await index.search("nexo", data[7], 3)
        assert found[0][0] == 7
        await assert_same_bounds(index, db, "nexo")
    assert "writing the int8 copies' file failed" in caplog.text
    assert "ValueError: a fault of the file's own code" in caplog.text


async def test_a_check_of_more_ids_than_one_read_takes_keeps_every_agents_vectors(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ids written since the last search are read back a chunk at a time, each chunk in agent
    order: two agents' vectors over several chunks are all kept, codes and copies."""
    monkeypatch.setattr(vector_cache, "_IDS_CHUNK", 7)
    data = vectors(60, 10)
    async with store.db.transaction() as tx:
        await store.index.add_many(tx, [(i, "nexo" if i % 2 else "bob", data[i]) for i in range(1, 41)])
    await store.index.search("nexo", data[1], 3)  # the check, in six chunks
    assert store.index.filed("nexo") == (20, 20)
    assert store.index.filed("bob") == (20, 20)
    for agent, first in (("nexo", 1), ("bob", 2)):
        assert (await store.index.search(agent, data[first], 1))[0][0] == first
        await assert_same_bounds(store.index, store.db, agent)
