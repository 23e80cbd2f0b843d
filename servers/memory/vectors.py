"""The vector index of the memory store as the store and the server see it: its table and its calls.

The search itself (sign-bit codes in memory, an exact rerank; see ``vector_search``) needs numpy,
about 11 MB of a process that otherwise holds 20. It is imported by the first call that needs it (a
search, a write, ``load()``), and that call builds the codes from SQLite, so an idle memory server,
and one that only keeps transcripts or MEMORY.md, never holds either.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import anyio

from servers.memory.errors import VectorDimensionError
from shared.db import Database, Migration, Reads, Transaction

if TYPE_CHECKING:
    import numpy as np

    from servers.memory.vector_search import VectorSearch

__all__ = ["VECTOR_MIGRATIONS", "VectorDimensionError", "VectorIndex"]

VECTOR_MIGRATIONS: tuple[Migration, ...] = (
    Migration.sql(
        "vectors_0001_memory_vectors",
        """
        CREATE TABLE memory_vectors(
            memory_id INTEGER PRIMARY KEY,
            agent TEXT NOT NULL,
            code BLOB NOT NULL,
            embedding BLOB NOT NULL
        );
        -- Covering: loading the codes and listing an agent's vectors never read the float32 blobs.
        CREATE INDEX memory_vectors_by_agent ON memory_vectors(agent, memory_id, code);
        """,
    ),
    Migration.sql(
        "vectors_0002_memory_vectors_q8",
        """
        CREATE TABLE memory_vectors_q8(
            memory_id INTEGER PRIMARY KEY,
            agent TEXT NOT NULL,
            scale REAL NOT NULL,
            error REAL NOT NULL,
            q BLOB NOT NULL
        );
        -- The copies a store of the previous version still lacks are built after the server is up
        -- (vector_q8.backfill), from memory_id > after on; one row while some are left.
        CREATE TABLE memory_vectors_q8_backfill(after INTEGER NOT NULL);
        INSERT INTO memory_vectors_q8_backfill(after)
            SELECT -9223372036854775808 WHERE EXISTS (SELECT 1 FROM memory_vectors);
        """,
    ),
)


async def backfill_pending(db: Reads) -> bool:
    """Whether some int8 copies are still to be built (``vector_q8.backfill``)."""
    return await db.fetchone("SELECT 1 FROM memory_vectors_q8_backfill LIMIT 1") is not None


def _check_dim(dim: object) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim={dim!r} must be a positive whole number (the embedder's dimension)")
    return dim


class VectorIndex:
    """Nearest-neighbour search over memory vectors, scoped to one agent per query."""

    def __init__(self, db: Database, dim: int) -> None:
        self.db = db
        self._dim = _check_dim(dim)
        self._search: VectorSearch | None = None
        self._searching: anyio.Event | None = None

    def __repr__(self) -> str:
        agents = "not loaded" if self._search is None else self._search.agents
        return f"<VectorIndex {self.db.path} dim={self.dim} agents={agents}>"

    @property
    def dim(self) -> int:
        return self._dim if self._search is None else self._search.dim

    @property
    def loaded(self) -> bool:
        """Whether numpy and the search are in this process yet (the codes come with the first search)."""
        return self._search is not None

    def _searcher(self) -> VectorSearch:
        if self._search is None:
            from servers.memory.vector_search import VectorSearch  # numpy comes with it: see the docstring

            self._search = VectorSearch(self.db, self._dim)
            if self._searching is not None:
                self._searching.set()
        return self._search

    def filed(self, agent: str | None = None) -> tuple[int, int]:
        """(vectors of ``agent`` (of every agent: None) in the index, of which with their int8 copy
        in a file); (0, 0) before the index is used."""
        return (0, 0) if self._search is None else self._search.filed(agent)

    async def until_filed(self) -> None:
        """Return once :meth:`keep_filed` has written every copy it has to (at once before the index
        is used; never while nothing runs :meth:`keep_filed`, so bound the wait)."""
        if self._search is not None:
            await self._search.until_filed()

    async def keep_filed(self) -> None:
        """Run for good beside the server: once the index is in use, keep each agent's int8 copies
        in a file read by ``pread`` (``vector_file``). An index never used costs nothing here."""
        if self._search is None:
            self._searching = anyio.Event()
            await self._searching.wait()
        await self._searcher().keep_filed()

    # -- writes: through the caller's transaction ------------------------------------------------

    async def add(self, tx: Transaction, memory_id: int, agent: str, vector: np.ndarray) -> None:
        """Store (or replace) the vector of `memory_id`; it commits or rolls back with `tx`."""
        await self._searcher().add(tx, memory_id, agent, vector)

    async def add_many(self, tx: Transaction, rows: Sequence[tuple[int, str, np.ndarray]]) -> None:
        """`add()` for many memories (ids must not repeat), in one statement."""
        await self._searcher().add_many(tx, rows)

    async def remove(self, tx: Transaction, memory_id: int) -> None:
        """Delete the vector of `memory_id` (nothing happens when it has none)."""
        await self._searcher().remove(tx, memory_id)

    async def clear(self, tx: Transaction) -> None:
        """Delete every vector of every agent (before re-embedding them all with another model)."""
        await self._searcher().clear(tx)

    async def reset(self, tx: Transaction, dim: int) -> None:
        """`clear()` and take vectors of `dim` dimensions from now on (a model of another size).

        The new size applies at once; should `tx` roll back, the old vectors stay and searches
        report the dimension mismatch until the index is built with their size again.
        """
        await self._searcher().reset(tx, _check_dim(dim))

    # -- reads -------------------------------------------------------------------------------------

    async def load(self) -> None:
        """Build the in-memory codes from SQLite now rather than at the first search.

        Raises VectorDimensionError when the stored vectors have another size than `dim`.
        """
        await self._searcher().load()

    async def count(self, agent: str | None = None) -> int:
        if agent is None:
            row = await self.db.fetchone("SELECT count(*) FROM memory_vectors")
        else:
            if not isinstance(agent, str) or not agent:
                raise ValueError(f"agent {agent!r} must be a non-empty string")
            row = await self.db.fetchone("SELECT count(*) FROM memory_vectors WHERE agent = ?", (agent,))
        assert row is not None
        return int(row[0])

    async def search(
        self, agent: str, query: np.ndarray, k: int, *, exact: bool = False, exclude: Collection[int] = ()
    ) -> list[tuple[int, float]]:
        """The `k` memories of `agent` nearest to `query`: (memory_id, cosine distance), nearest first."""
        return await self._searcher().search(agent, query, k, exact=exact, exclude=exclude)

    async def ceilings(
        self, agent: str, query: np.ndarray, ids: Collection[int], *, via: Reads | None = None
    ) -> dict[int, float]:
        """For each of `ids` that is one of `agent`'s memories, a cosine similarity to `query` that
        its own is certainly not above (from the int8 copies: ``vector_q8``), read through `via`."""
        return await self._searcher().ceilings(agent, query, ids, via=via)

    async def distances(
        self, agent: str, query: np.ndarray, ids: Collection[int], *, via: Reads | None = None
    ) -> dict[int, float]:
        """The cosine distance from `query` of each of `ids` that is one of `agent`'s memories, read
        through `via` when given (a read-only connection), else the index's own."""
        return await self._searcher().distances(agent, query, ids, via=via)
