"""Which embedding model the vectors came from, and re-embedding everything with another one.

The database records the model id and dimension its vectors were made with. Vectors of two models
are not comparable, so a server configured with another model refuses to start and names the fix,
``nexo memory reindex``; that command starts the server with ``allow_model_mismatch`` and calls
:meth:`Reindexer.step` until it reports ``finished``. One step re-embeds one batch (in id order)
and commits the vectors and its progress cursor together, so an interrupted reindex resumes where
it stopped. Until the last step records the new model, vector search stays off and new memories
are refused; keyword recall keeps working.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from servers.memory.errors import ModelMismatch
from servers.memory.models import Vector
from servers.memory.store import MemoryStore
from shared.db import Database

META_MODEL = "embedding_model_id"
META_DIM = "embedding_dim"
META_REINDEX_AFTER = "reindex_after_id"


@dataclass(slots=True)
class ModelState:
    model_id: str
    dim: int
    recorded_id: str | None
    recorded_dim: int | None

    @property
    def matches(self) -> bool:
        return (self.recorded_id, self.recorded_dim) == (self.model_id, self.dim)

    def blocker(self) -> str | None:
        """Why vectors cannot be used now, or None."""
        if self.matches:
            return None
        return (
            f"the stored vectors come from embedding model {self.recorded_id!r} but the configured one is "
            f"{self.model_id!r}; the operator must run `nexo memory reindex`"
        )


async def recorded_model(db: Database) -> tuple[str, int] | None:
    """(model id, dimension) the stored vectors were made with; None in a new database."""
    rows = await db.fetchall("SELECT key, value FROM memory_meta WHERE key IN (?, ?)", (META_MODEL, META_DIM))
    values = {str(key): str(value) for key, value in rows}
    if META_MODEL not in values or META_DIM not in values:
        return None
    return values[META_MODEL], int(values[META_DIM])


async def check_model(store: MemoryStore, model_id: str, dim: int, *, allow_mismatch: bool) -> ModelState:
    """Compare the configured model with the recorded one; record it in a new database."""
    recorded = await recorded_model(store.db)
    if recorded is None:
        await store.set_meta({META_MODEL: model_id, META_DIM: str(dim)})
        return ModelState(model_id, dim, model_id, dim)
    state = ModelState(model_id, dim, *recorded)
    if not state.matches and not allow_mismatch:
        raise ModelMismatch(recorded[0], recorded[1], model_id, dim)
    return state


@dataclass(frozen=True, slots=True)
class Progress:
    done: int
    total: int
    finished: bool


class Reindexer:
    def __init__(
        self,
        store: MemoryStore,
        model: ModelState,
        embed_many: Callable[[Sequence[str]], Awaitable[list[Vector]]],
    ) -> None:
        self._store = store
        self._model = model
        self._embed_many = embed_many

    async def step(self, batch_size: int) -> Progress:
        """Re-embed the next ``batch_size`` memories; the last step records the configured model."""
        store = self._store
        cursor = await store.meta(META_REINDEX_AFTER)
        if cursor is None:
            async with store.db.transaction() as tx:
                if self._model.recorded_dim != self._model.dim:
                    # Vectors of another dimension cannot share the index with the new ones; those
                    # of the same dimension are replaced one by one below.
                    await store.index.clear(tx)
                await store.set_meta({META_REINDEX_AFTER: "0"}, tx)
            cursor = "0"
        after = int(cursor)
        batch = await store.page(agent=None, after_id=after, limit=batch_size)
        if batch:
            vectors = await self._embed_many([memory.content for memory in batch])
            async with store.db.transaction() as tx:
                rows = [(m.id, m.agent, vector) for m, vector in zip(batch, vectors, strict=True)]
                await store.index.add_many(tx, rows)
                after = batch[-1].id
                await store.set_meta({META_REINDEX_AFTER: str(after)}, tx)
        finished = len(batch) < batch_size
        if finished:
            await store.set_meta(
                {META_MODEL: self._model.model_id, META_DIM: str(self._model.dim), META_REINDEX_AFTER: None}
            )
            self._model.recorded_id, self._model.recorded_dim = self._model.model_id, self._model.dim
        return Progress(done=await store.count_upto(after), total=await store.count(), finished=finished)
