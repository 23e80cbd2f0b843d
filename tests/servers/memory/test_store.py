"""The store on a real SQLite file: one transaction per memory, agent scoping, safe FTS queries."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from servers.memory.embeddings import Embedder, EmbeddingError
from servers.memory.errors import ModelMismatch
from servers.memory.keyword import keyword_query
from servers.memory.models import NewMemory, Vector
from servers.memory.recall import Recaller
from servers.memory.reindex import check_model
from servers.memory.state import MIGRATIONS
from servers.memory.store import MemoryStore
from servers.memory.vectors import VectorIndex
from shared.db import Database
from tests.servers.memory.conftest import Clock

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path: Path, embedder: Embedder) -> AsyncIterator[MemoryStore]:
    async with Database.open(tmp_path / "memory.db", MIGRATIONS, load_vec=True) as db:
        index = VectorIndex(db, embedder.dim)
        await index.load()
        yield MemoryStore(db, index, clock=Clock())


def new(content: str, agent: str = "nexo") -> NewMemory:
    return NewMemory(
        agent=agent, content=content, tags=("t",), kind="fact", provenance="owner", importance=0.5
    )


async def vector(embedder: Embedder, text: str) -> Vector:
    row: Vector = (await embedder.embed([text]))[0]
    return row


async def rows(store: MemoryStore) -> tuple[int, int, int]:
    """(memories, FTS entries, vectors)."""
    memories = await store.db.fetchone("SELECT count(*) FROM memories")
    fts = await store.db.fetchone("SELECT count(*) FROM memories_fts_docsize")
    assert memories is not None
    assert fts is not None
    return int(memories[0]), int(fts[0]), await store.index.count()


async def test_a_memory_its_fts_entry_and_its_vector_are_written_together(
    store: MemoryStore, embedder: Embedder
) -> None:
    stored = await store.add(new("Ana prefers green tea"), await vector(embedder, "Ana prefers green tea"))
    assert stored.created
    assert await rows(store) == (1, 1, 1)
    with pytest.raises(Exception):  # noqa: B017, PT011 -- whatever the index raises for a wrong dimension
        await store.add(new("Bob likes coffee"), np.ones(3, dtype=np.float32))
    assert await rows(store) == (1, 1, 1)
    assert await store.forget(stored.memory.id) is not None
    assert await rows(store) == (0, 0, 0)
    assert await store.forget(stored.memory.id) is None


async def test_keyword_search_treats_fts_syntax_as_text_and_folds_diacritics(
    store: MemoryStore, embedder: Embedder
) -> None:
    for text in ["Meet at the café near the station", "NEAR the river: a boat", "Tea with Ana"]:
        await store.add(new(text), await vector(embedder, text))
    query = await keyword_query('cafe NEAR("boat"', store.term_documents)
    assert query is not None
    hits = (await store.keyword("nexo", query, 10)).hits
    assert [memory_id for memory_id, _ in hits] == [2, 1]
    assert hits[0][1] > hits[1][1] > 0


async def test_every_query_is_scoped_to_one_agent(store: MemoryStore, embedder: Embedder) -> None:
    tea = await vector(embedder, "green tea")
    await store.add(new("Ana likes green tea", agent="ana"), tea)
    await store.add(new("Bob likes green tea", agent="bob"), tea)
    query = await keyword_query("green tea", store.term_documents)
    assert query is not None
    assert [memory_id for memory_id, _ in (await store.keyword("ana", query, 10)).hits] == [1]
    assert await store.nearest("bob", tea, 10) == [2]
    assert list(await store.by_ids("ana", [1, 2])) == [1]
    assert [m.id for m in await store.page(agent="bob")] == [2]


async def test_the_same_content_for_the_same_agent_is_one_memory_and_for_another_agent_two(
    store: MemoryStore, embedder: Embedder
) -> None:
    tea = await vector(embedder, "green tea")
    first = await store.add(new("Ana likes green tea"), tea)
    twin = await store.add(new("Ana likes green tea"), tea)
    other = await store.add(new("Ana likes green tea", agent="bob"), tea)
    assert [(s.memory.id, s.created) for s in (first, twin, other)] == [(1, True), (1, False), (2, True)]
    assert twin.memory.access_count == 1
    assert await rows(store) == (2, 2, 2)


async def test_the_embedding_model_is_recorded_and_a_different_one_is_refused(store: MemoryStore) -> None:
    first = await check_model(store, "model-a", 384, allow_mismatch=False)
    same = await check_model(store, "model-a", 384, allow_mismatch=False)
    allowed = await check_model(store, "model-b", 768, allow_mismatch=True)
    with pytest.raises(ModelMismatch):
        await check_model(store, "model-b", 768, allow_mismatch=False)
    assert (first.blocker(), same.blocker()) == (None, None)
    assert allowed.blocker() == (
        "the stored vectors come from embedding model 'model-a' but the configured one is 'model-b'; "
        "the operator must run `nexo memory reindex`"
    )


async def test_metadata_keys_can_be_set_replaced_and_deleted(store: MemoryStore) -> None:
    await store.set_meta({"a": "1", "b": "2"})
    await store.set_meta({"a": "3", "b": None})
    assert (await store.meta("a"), await store.meta("b")) == ("3", None)


async def test_degraded_hybrid_recall_keeps_every_keyword_hit_not_only_the_strong_ones(
    store: MemoryStore, embedder: Embedder
) -> None:
    texts = [
        "Sam repairs small electronics with a soldering iron",
        "The car's mechanic is Talleres García in Usera",
        "Sam's car is a grey Skoda Octavia",
    ]
    for text in texts:
        await store.add(new(text), await vector(embedder, text))

    async def unreachable(text: str) -> Vector:
        raise EmbeddingError(f"cannot embed {text!r} (test)")

    recalled = await Recaller(store, unreachable).recall(
        "nexo", "who repairs the car?", mode="hybrid", limit=5
    )
    assert recalled.mode == "keyword"
    assert sorted(memory.content for memory in recalled.memories) == sorted(texts)


def pointing(dim: int, cosine: float, side: int) -> Vector:
    """A unit vector at ``cosine`` from the first axis, leaning towards axis ``side``."""
    row = np.zeros(dim, dtype=np.float32)
    row[0], row[side] = cosine, math.sqrt(1.0 - cosine**2)
    return row


async def test_a_shared_rare_word_settles_a_near_tie_of_the_vector_side_but_not_a_clear_preference(
    store: MemoryStore, embedder: Embedder
) -> None:
    dim = embedder.dim
    answer, chat = "Sam's type is A negative, noted on the donor card", "choir group chat"
    filler = [
        f"note {index} about the weekly shopping, the bins and the recycling days" for index in range(8)
    ]
    await store.add(
        new("the blood test results came back fine last spring after the checkup"), pointing(dim, 0.1, 9)
    )
    for index, text in enumerate(filler):
        await store.add(new(text), pointing(dim, 0.1, 10 + index))

    async def recall(answer_cosine: float, chat_cosine: float) -> list[str]:
        first = await store.add(new(answer), pointing(dim, answer_cosine, 1))
        second = await store.add(new(chat), pointing(dim, chat_cosine, 2))

        async def embed(text: str) -> Vector:
            return pointing(dim, 1.0, 1)

        recalled = await Recaller(store, embed).recall(
            "nexo", "what blood group am I?", mode="hybrid", limit=1
        )
        await store.forget(first.memory.id)
        await store.forget(second.memory.id)
        return [memory.content for memory in recalled.memories]

    # "group" alone is most of the question's keyword weight: the chat is a strong keyword hit.
    assert await recall(0.9, 0.8) == [answer]
    assert await recall(0.81, 0.8) == [chat]


async def test_the_one_memory_holding_every_term_of_the_query_comes_first_whatever_its_cosine(
    store: MemoryStore, embedder: Embedder
) -> None:
    dim = embedder.dim
    serial = await store.add(new("the boiler's serial number is 9421804VK1192A0001QX"), pointing(dim, 0.2, 1))
    near = await store.add(new("the boiler was serviced in March by Termotec"), pointing(dim, 0.6, 2))
    for index in range(8):
        await store.add(
            new(f"note {index} about the weekly shopping and the bins"), pointing(dim, 0.1, 10 + index)
        )

    async def embed(text: str) -> Vector:
        return pointing(dim, 1.0, 1)

    recaller = Recaller(store, embed)
    recalled = await recaller.recall("nexo", "9421804VK1192A0001QX", mode="hybrid", limit=2)
    assert [memory.id for memory in recalled.memories] == [serial.memory.id, near.memory.id]
    # Once two memories hold the term it no longer picks one out: the vector side decides.
    await store.add(new("receipt for 9421804VK1192A0001QX"), pointing(dim, 0.1, 30))
    recalled = await recaller.recall("nexo", "9421804VK1192A0001QX", mode="hybrid", limit=1)
    assert [memory.id for memory in recalled.memories] == [near.memory.id]
