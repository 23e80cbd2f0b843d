"""What vector recall searches: every memory of the agent that was not forgotten, archived or not,
filtered inside the search so that ``limit`` results come back whenever they exist."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from servers.memory.models import Vector, content_hash
from servers.memory.recall import Recaller
from servers.memory.store import MemoryStore
from tests.servers.memory.conftest import open_store

pytestmark = pytest.mark.anyio

DIM = 32


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    async with open_store(tmp_path / "memory.db", DIM) as opened:
        yield opened


async def insert(store: MemoryStore, rows: list[tuple[str, int, np.ndarray]]) -> None:
    """Memories with these vectors, written in one statement (as an import would)."""
    async with store.db.transaction() as tx:
        await tx.executemany(
            "INSERT INTO memories (id, agent, content, content_sha256, kind, provenance, importance, "
            "created_at, last_accessed_at) VALUES (?, ?, ?, ?, 'fact', 'owner', 0.5, 0, 0)",
            [(i, agent, f"memory {i}", content_hash(f"memory {i}")) for agent, i, _ in rows],
        )
        await store.index.add_many(tx, [(i, agent, vector) for agent, i, vector in rows])


def unit(rows: np.ndarray) -> np.ndarray:
    return np.asarray(rows / np.linalg.norm(rows, axis=-1, keepdims=True), dtype=np.float32)


async def test_vector_recall_returns_the_exact_nearest_of_every_memory_not_forgotten(
    store: MemoryStore,
) -> None:
    rng = np.random.default_rng(7)
    query = unit(rng.normal(size=DIM))
    # 450 memories (more than the index reranks exactly for 10 neighbours, so the quantised search
    # runs), the 60 nearest to the query planted around it; another agent's memories nearer still.
    vectors = unit(rng.normal(size=(450, DIM)))
    vectors[:60] = unit(query + 0.35 * rng.normal(size=(60, DIM)))
    ids = np.arange(1, 451)
    bob = unit(query + 0.01 * rng.normal(size=(20, DIM)))
    await insert(store, [("ana", int(i), vector) for i, vector in zip(ids, vectors, strict=True)])
    await insert(store, [("bob", 451 + i, vector) for i, vector in enumerate(bob)])
    # A consolidation pass kept 50 in the working set; the operator forgot 20 of the nearest.
    await store.set_archived([int(i) for i in ids[50:]], True)
    forgotten = [int(i) for i in ids[np.argsort(vectors @ -query)[:40:2]]]
    for memory_id in forgotten:
        await store.forget(memory_id)
    alive = ~np.isin(ids, forgotten)
    exact = [int(i) for i in ids[alive][np.argsort(-(vectors[alive] @ query), kind="stable")]]

    async def embed(text: str) -> Vector:
        return query

    recaller = Recaller(store, embed)
    for limit in (1, 5, 50):
        recalled = await recaller.recall("ana", "anything", mode="vector", limit=limit, touch=False)
        assert [memory.id for memory in recalled.memories] == exact[:limit]
    assert [memory_id for memory_id, _ in await store.neighbours("ana", query, 10)] == exact[:10]
