"""Shared fixtures of the memory server tests: one real embedder per session, a settable clock,
settings in a temporary state directory and an in-memory MCP client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import numpy as np
import numpy.typing as npt
import pytest
from mcp import Client

from servers.memory.embeddings import Embedder, EmbeddingError, EmbeddingSettings, build_embedder
from servers.memory.server import build_server
from servers.memory.settings import MemorySettings
from servers.memory.state import MIGRATIONS
from servers.memory.store import MemoryStore
from servers.memory.vectors import VectorIndex
from shared.db import Database
from shared.protocol.memory.meta import Provenance, tool_meta

START = 1_800_000_000.0
DAY = 86_400.0


@dataclass
class Clock:
    """An injectable wall clock that only moves when a test moves it."""

    now: float = START

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@asynccontextmanager
async def open_store(path: Path, dim: int) -> AsyncIterator[MemoryStore]:
    """A memory store on a real SQLite file with a ``dim``-wide vector index and a still clock."""
    async with Database.open(path, MIGRATIONS, load_vec=True) as db:
        index = VectorIndex(db, dim)
        await index.load()
        yield MemoryStore(db, index, clock=Clock())


async def rolled_back(store: MemoryStore, added: list[tuple[int, str, np.ndarray]], removed: int) -> None:
    """Vectors written and one removed in a transaction that then fails: all of it rolls back."""

    async def abandoned() -> None:
        async with store.db.transaction() as tx:
            await store.index.add_many(tx, added)
            await store.index.remove(tx, removed)
            raise RuntimeError("abandoned")

    with pytest.raises(RuntimeError, match="abandoned"):
        await abandoned()


class Switchable:
    """The real embedder, which can be made to fail: the seam where an embedding service goes down."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.failing = False

    async def start(self) -> None:
        await self.inner.start()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.failing:
            raise EmbeddingError("the embedding service is unreachable (test)")
        return await self.inner.embed(texts)


@pytest.fixture(scope="session")
def embedder() -> Iterator[Embedder]:
    """The real local embedder, loaded once for the whole session (about a second)."""
    instance = build_embedder(EmbeddingSettings())
    anyio.run(instance.start)
    yield instance
    anyio.run(instance.aclose)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def settings(tmp_path: Path) -> MemorySettings:
    return MemorySettings(state_dir=tmp_path / "state")


@asynccontextmanager
async def connect(
    settings: MemorySettings, embedder: Embedder, clock: Clock | None = None
) -> AsyncIterator[Client]:
    server = build_server(settings, embedder=embedder, clock=clock or Clock())
    async with Client(server) as client:
        yield client


async def call(
    client: Client,
    tool: str,
    arguments: dict[str, Any] | None = None,
    *,
    agent: str | None = None,
    provenance: Provenance = "owner",
) -> dict[str, Any]:
    """Call a tool and return its structured result; fail the test on a tool error."""
    meta = None if agent is None else tool_meta(agent, provenance)
    result = await client.call_tool(tool, arguments or {}, meta=meta)
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def tool_error(
    client: Client,
    tool: str,
    arguments: dict[str, Any],
    *,
    agent: str | None = None,
    provenance: Provenance = "owner",
) -> str:
    """Call a tool that must fail and return the error text the model sees."""
    meta = None if agent is None else tool_meta(agent, provenance)
    result = await client.call_tool(tool, arguments, meta=meta)
    assert result.is_error, result.structured_content
    (content,) = result.content
    assert isinstance(content, types.TextContent)
    return content.text
