"""Opening the memory server's resources: the database, the embedder, the indexes, MEMORY.md files.

:func:`open_service` is the server's lifespan; :func:`preflight` runs the same checks before the
server starts serving, so a wrong setting or a changed embedding model ends the process with one
clear line on stderr (``server_main`` prints it and exits 1) instead of a traceback from inside the
transport.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import anyio

from servers.memory.embeddings import Embedder, EmbeddingError, build_embedder
from servers.memory.errors import MemoryUnavailable, ModelMismatch
from servers.memory.guard import SecretGuard
from servers.memory.heap import keep_the_heap_small
from servers.memory.memory_schema import MEMORY_MIGRATIONS
from servers.memory.notebook import Notebooks
from servers.memory.reindex import check_model, recorded_model
from servers.memory.service import MemoryService
from servers.memory.sessions import SESSION_MIGRATIONS, SessionStore
from servers.memory.settings import MemorySettings
from servers.memory.store import MemoryStore
from servers.memory.vectors import VECTOR_MIGRATIONS, VectorIndex, backfill_pending
from shared.db import Database, DatabaseError, Migration, Reader

logger = logging.getLogger("nexo.memory")

MIGRATIONS: tuple[Migration, ...] = (*MEMORY_MIGRATIONS, *VECTOR_MIGRATIONS, *SESSION_MIGRATIONS)


def make_guard(settings: MemorySettings) -> SecretGuard:
    try:
        return SecretGuard(settings.guard_mode, disabled_rules=settings.guard_disabled_rules)
    except ValueError as exc:
        raise MemoryUnavailable(f"{exc} (NEXO_MEMORY_GUARD_DISABLED_RULES)") from exc


@asynccontextmanager
async def open_database(settings: MemorySettings) -> AsyncIterator[Database]:
    """The memory database with every migration applied; a problem opening it is MemoryUnavailable."""
    async with AsyncExitStack() as stack:
        try:
            db = await stack.enter_async_context(
                Database.open(settings.database, MIGRATIONS, synchronous="FULL", load_vec=True)
            )
        except DatabaseError as exc:
            raise MemoryUnavailable(str(exc)) from exc
        yield db


@asynccontextmanager
async def _reader(db: Database) -> AsyncIterator[Reader]:
    """The read-only connection recall's keyword side reads through (``MemoryStore.reads``)."""
    async with AsyncExitStack() as stack:
        try:
            reader = await stack.enter_async_context(db.reader())
        except DatabaseError as exc:
            raise MemoryUnavailable(str(exc)) from exc
        yield reader


def preflight(settings: MemorySettings) -> None:
    """Check settings, the database and the embedding model; raise :class:`MemoryUnavailable`.

    Nothing is loaded or contacted: a remote model whose dimension is not configured is compared
    by name only here (the lifespan compares the dimension once ``start()`` probed it).
    """
    make_guard(settings)
    embedder = build_embedder(settings.embedding)
    try:
        dim: int | None = embedder.dim
    except EmbeddingError:
        dim = None

    async def check() -> None:
        async with open_database(settings) as db:
            recorded = await recorded_model(db)
        if recorded is None or settings.allow_model_mismatch:
            return
        recorded_id, recorded_dim = recorded
        if recorded_id != embedder.model_id or dim not in (None, recorded_dim):
            raise ModelMismatch(recorded_id, recorded_dim, embedder.model_id, dim)

    anyio.run(check)


@asynccontextmanager
async def open_service(
    settings: MemorySettings,
    *,
    embedder: Embedder | None = None,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[MemoryService]:
    """Everything the tools need, opened in order and closed in reverse."""
    keep_the_heap_small()  # what recalls free goes back to the system (servers.memory.heap)
    guard = make_guard(settings)
    owned = embedder is None
    active = build_embedder(settings.embedding) if embedder is None else embedder
    async with open_database(settings) as db, _reader(db) as reader:
        try:
            if owned:
                await active.start()
            service = await _service(settings, db, reader, active, guard, clock)
        except (MemoryUnavailable, EmbeddingError) as exc:
            # Raised from a lifespan it surfaces as a transport traceback; this line says it plainly.
            logger.error("the memory server cannot start: %s", exc)
            if owned:
                await active.aclose()
            raise
        try:
            async with anyio.create_task_group() as tg:
                release = getattr(active, "release_if_idle", None)
                idle_s = settings.embedding.idle_unload_s
                if owned and release is not None and idle_s > 0:
                    tg.start_soon(_unload_when_idle, release, idle_s)
                load = getattr(active, "load", None)
                if owned and load is not None and idle_s == 0:
                    await load()  # kept loaded for good: load it before the first request waits for it
                tg.start_soon(_flush_access_every, service.store, settings.access_flush_s)
                tg.start_soon(service.store.index.keep_filed)  # the int8 copies' file: vector_file
                if await backfill_pending(db):
                    # A store of the previous version: its int8 copies are built while it answers.
                    from servers.memory.vector_q8 import keep_backfilling  # numpy: only then

                    tg.start_soon(keep_backfilling, db)
                try:
                    yield service
                finally:
                    tg.cancel_scope.cancel()
                    with anyio.CancelScope(shield=True):
                        await _flush_access_at_exit(service.store)
        finally:
            if owned:
                with anyio.CancelScope(shield=True):
                    await active.aclose()


async def _flush_access_every(store: MemoryStore, interval_s: float) -> None:
    while True:
        await anyio.sleep(interval_s)
        try:
            await store.flush_access()
        except sqlite3.Error as exc:
            logger.warning("access counts of recalled memories not written yet (%s); retrying", exc)


async def _flush_access_at_exit(store: MemoryStore) -> None:
    try:
        await store.flush_access()
    except sqlite3.Error as exc:
        logger.warning("access counts of %d recalled memories lost at shutdown: %s", len(store.access), exc)


async def _unload_when_idle(release: Callable[[float], Awaitable[bool]], idle_s: float) -> None:
    while True:
        await anyio.sleep(idle_s / 2)
        await release(idle_s)


async def _service(
    settings: MemorySettings,
    db: Database,
    reader: Reader,
    embedder: Embedder,
    guard: SecretGuard,
    clock: Callable[[], float],
) -> MemoryService:
    index = VectorIndex(db, embedder.dim)
    store = MemoryStore(db, index, reader=reader, clock=clock)
    model = await check_model(
        store, embedder.model_id, embedder.dim, allow_mismatch=settings.allow_model_mismatch
    )
    if not model.matches:
        logger.warning("%s; vector search is off until then", model.blocker())
    sessions = SessionStore(db, max_entries=settings.transcript_max_entries, clock=clock)
    removed = await sessions.gc(settings.session_idle_gc_s)
    if removed:
        logger.info("removed %d sessions idle for over %g days", removed, settings.session_idle_gc_days)
    return MemoryService(
        settings=settings,
        store=store,
        sessions=sessions,
        embedder=embedder,
        guard=guard,
        notebooks=Notebooks(settings.agents_dir, guard=guard, budget_bytes=settings.memory_md_budget_bytes),
        model=model,
        clock=clock,
    )
