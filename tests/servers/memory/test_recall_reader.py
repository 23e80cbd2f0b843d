"""Recall's keyword side reads on a connection of its own (``MemoryStore.reads``): the same answers
as on the writer connection, every committed write seen at once, and no wait for a write in progress."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from servers.memory import hybrid_keyword
from servers.memory.embeddings import Embedder
from servers.memory.keyword import Term, keyword_query
from servers.memory.keyword_rank import ranked
from servers.memory.models import NewMemory, Vector
from servers.memory.recall import Recaller
from servers.memory.settings import MemorySettings
from servers.memory.state import MIGRATIONS, open_service
from servers.memory.store import MemoryStore
from servers.memory.vectors import VectorIndex
from shared.db import Database, Reader
from shared.protocol.memory.records import ImportRecord
from tests.servers.memory.conftest import Clock

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
    "serial SN-4411-B is the router in the attic",
)
QUESTIONS = ("garden ladder", "kayak", "blue kitchen kettle", "SN-4411-B", "mower spring", "passport Ana")


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[MemoryStore, MemoryStore]]:
    """The same database seen twice: keyword reads on a reader, and on the writer connection."""
    async with Database.open(tmp_path / "memory.db", MIGRATIONS, load_vec=True) as db, db.reader() as reader:
        index = VectorIndex(db, DIM)
        await index.load()
        yield MemoryStore(db, index, reader=reader, clock=Clock()), MemoryStore(db, index, clock=Clock())


def vector(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


async def keyword_ids(store: MemoryStore, question: str) -> list[tuple[int, float]]:
    query = await keyword_query(question, store.term_documents)
    assert query is not None
    return (await ranked(store.reads, "nexo", query, 10)).hits


async def embed(text: str) -> Vector:
    return vector(len(text))


async def recalled(store: MemoryStore, question: str) -> list[int]:
    recaller = Recaller(store, embed)
    found = await recaller.recall("nexo", question, mode="keyword", limit=10, touch=False)
    return [memory.id for memory in found.memories]


async def test_the_reader_ranks_as_the_writer_connection_does_across_add_forget_archive_and_import(
    stores: tuple[MemoryStore, MemoryStore],
) -> None:
    on_reader, on_writer = stores
    assert isinstance(on_reader.reads, Reader)
    stored = await on_reader.add_many(
        [(NewMemory("nexo", text, (), "fact", "owner", 0.5), vector(n)) for n, text in enumerate(CORPUS)]
    )
    ids = [item.memory.id for item in stored]

    async def same_everywhere() -> dict[str, list[int]]:
        answers = {}
        for question in QUESTIONS:
            hits = await keyword_ids(on_reader, question)
            assert hits == await keyword_ids(on_writer, question), question
            answers[question] = await recalled(on_reader, question)
            assert answers[question] == [memory_id for memory_id, _ in hits]
        return answers

    first = await same_everywhere()
    assert first["SN-4411-B"] == [ids[7]]
    assert first["kayak"][:2] == [ids[2], ids[1]]

    await on_reader.forget(ids[2])
    assert ids[2] not in (await same_everywhere())["kayak"]

    await on_reader.set_archived(ids, True)
    assert (await same_everywhere())["kayak"] == [ids[1]]

    imported = await on_reader.add_many(
        [(NewMemory("nexo", "the new kayak trailer is in the garage", (), "fact", "owner", 0.5), vector(50))]
    )
    assert sorted((await same_everywhere())["kayak"]) == [ids[1], imported[0].memory.id]


async def test_keyword_recall_answers_while_a_write_holds_the_writer_connection(
    stores: tuple[MemoryStore, MemoryStore],
) -> None:
    on_reader, _ = stores
    await on_reader.add(NewMemory("nexo", "the kayak is red", (), "fact", "owner", 0.5), vector(1))
    holding, release = anyio.Event(), anyio.Event()

    async def hold_transaction() -> None:
        async with on_reader.db.transaction() as tx:
            await tx.execute("UPDATE memories SET importance = 0.9")
            holding.set()
            await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold_transaction)
        await holding.wait()
        with anyio.fail_after(5):
            assert len(await recalled(on_reader, "kayak")) == 1
        release.set()


async def test_the_servers_recall_reads_on_its_own_connection_and_finds_what_was_just_stored(
    tmp_path: Path, embedder: Embedder
) -> None:
    settings = MemorySettings(state_dir=tmp_path / "state")
    async with open_service(settings, embedder=embedder, clock=Clock()) as service:
        assert isinstance(service.store.reads, Reader)
        await service.import_records([ImportRecord(agent="nexo", content="the kayak paddle is blue")])
        holding, release = anyio.Event(), anyio.Event()

        async def hold_transaction() -> None:
            async with service.store.db.transaction():
                holding.set()
                await release.wait()

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold_transaction)
            await holding.wait()
            with anyio.fail_after(5):
                found = await service.recall("nexo", "kayak paddle", mode="keyword", touch=False)
            release.set()
        assert [memory.content for memory in found.memories] == ["the kayak paddle is blue"]
        for mode in ("keyword", "hybrid", "vector"):
            stored = await service.import_records(
                [ImportRecord(agent="nexo", content=f"the {mode} canoe is green")]
            )
            assert stored[0] == 1
            found = await service.recall("nexo", f"{mode} canoe green", mode=mode, limit=1, touch=False)
            assert [memory.content for memory in found.memories] == [f"the {mode} canoe is green"]


async def test_hybrid_recall_reads_its_keyword_candidates_while_the_question_is_embedded(
    stores: tuple[MemoryStore, MemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model embeds on worker threads and the keyword side reads on the reader's, so the keyword
    side no longer waits for the vector before its first read (only its bounds of the candidates'
    cosines need it). An embedder that returns only once the keyword side has read proves it."""
    store, _ = stores
    await store.add_many(
        [(NewMemory("nexo", text, (), "fact", "owner", 0.5), vector(n)) for n, text in enumerate(CORPUS)]
    )
    keyword_read = anyio.Event()
    term_documents = store.term_documents

    async def counted(terms: Sequence[Term], at_most: int) -> list[int]:
        keyword_read.set()
        return await term_documents(terms, at_most)

    async def embed_once_keywords_are_read(text: str) -> Vector:
        with anyio.fail_after(10):
            await keyword_read.wait()
        return vector(len(text))

    monkeypatch.setattr(store, "term_documents", counted)
    found = await Recaller(store, embed_once_keywords_are_read).recall(
        "nexo", "kayak paddle", mode="hybrid", limit=3, touch=False
    )
    assert found.mode == "hybrid"
    assert CORPUS.index("the kayak paddle is blue and the kayak is red") + 1 in [m.id for m in found.memories]


async def test_the_vector_search_starts_once_the_keyword_side_has_ranked(
    stores: tuple[MemoryStore, MemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keyword side reads its candidates' text while the question is embedded, and the vector
    search waits for it rather than share the two cores with it. A keyword side that fails still
    lets the search run, and its failure is raised as itself."""
    store, _ = stores
    await store.add_many(
        [(NewMemory("nexo", text, (), "fact", "owner", 0.5), vector(n)) for n, text in enumerate(CORPUS)]
    )
    events: list[str] = []
    real_rank = hybrid_keyword.rank
    real_neighbours = store.neighbours

    async def rank(*args: Any, **kwargs: Any) -> hybrid_keyword.Ranking:
        ranking = await real_rank(*args, **kwargs)
        events.append("ranked")
        return ranking

    async def neighbours(agent: str, query: Vector, k: int) -> list[tuple[int, float]]:
        events.append("search")
        return await real_neighbours(agent, query, k)

    async def embed(text: str) -> Vector:
        return vector(len(text))

    monkeypatch.setattr(hybrid_keyword, "rank", rank)
    monkeypatch.setattr(store, "neighbours", neighbours)
    recaller = Recaller(store, embed)
    with anyio.fail_after(10):
        found = await recaller.recall("nexo", "kayak paddle", mode="hybrid", limit=3, touch=False)
    assert found.mode == "hybrid"
    assert events == ["ranked", "search"]

    async def failing(*args: Any, **kwargs: Any) -> hybrid_keyword.Ranking:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(hybrid_keyword, "rank", failing)
    events.clear()
    with anyio.fail_after(10), pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        await recaller.recall("nexo", "kayak paddle", mode="hybrid", limit=3, touch=False)
    assert events == ["search"]
