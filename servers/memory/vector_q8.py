"""Int8 copies of the memory vectors, each with the bound of its rounding error.

A search's exact rerank and a hybrid recall's keyword candidates read vectors by primary key,
hundreds per question. At a million memories the float32 table (1.5 KB a row, 1.6 GB) does not
stay in the page cache of a small machine, and most of those reads went to the disk. This table
holds per memory the vector rounded to int8 (``q``, 384 bytes for 384 dimensions) with its
``scale`` and ``error``, the length of what rounding lost (``|v - scale * q|``). For a unit query
``x``, Cauchy-Schwarz bounds the exact cosine: ``|x . v - scale * (x . q)| <= error``. So:

- a rerank keeps the rows whose upper bound reaches the k-th best lower bound (any other row has
  k rows certainly nearer) and reads the float32 vectors of those few only: the same k nearest
  and the same distances as reading every float32 vector;
- a hybrid recall leaves out a keyword candidate whose upper bound is below the cut that decides
  whether it can be among the results (``servers.memory.hybrid_keyword``).

Written in the same transaction as the float32 row (``vector_search``), so the two never disagree.
Searches read them from a file of fixed-size records once the server has written it there
(``vector_file``; 5x faster than by primary key), and from this table until then.
A store of an older version gets the table empty when it is opened (``vectors_0002_memory_vectors_q8``)
and :func:`backfill` builds its copies once the server is up, a chunk per transaction (about 28 s
per million vectors here, while the server answers). Until a row has its copy,
:func:`bounds` gives it the widest bound, so the rerank reads its float32 vector and hybrid recall
keeps it as a candidate: the same results, read as before this table existed.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any

import anyio
import numpy as np

from servers.memory.vector_cache import ids_json
from servers.memory.vector_file import Copies, copies_of
from shared.db import Database, Reads

logger = logging.getLogger("nexo.memory")

ERROR_SLACK = 1e-5
"""Added to each stored error: the float32 arithmetic of a bound may round either way."""
UNBOUNDED = 1.0 + ERROR_SLACK
"""The error of a row whose copy is not built yet, estimated at 0: any cosine lies within it."""
BACKFILL_CHUNK = 2_000
"""Copies built per transaction: each holds the writer for a few tens of milliseconds."""
BACKFILL_RETRY_S = 60.0

UPSERT = (
    "INSERT INTO memory_vectors_q8(memory_id, agent, scale, error, q) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT(memory_id) DO UPDATE SET agent = excluded.agent, scale = excluded.scale, "
    "error = excluded.error, q = excluded.q"
)


def quantized(unit: np.ndarray) -> Copies:
    """(q, scale, error) of each row of the unit (n, dim) float32 matrix."""
    scale = np.maximum(np.abs(unit).max(axis=1), np.float32(1e-30)) / np.float32(127)
    q = np.rint(unit / scale[:, np.newaxis]).astype(np.int8)
    lost = unit.astype(np.float64) - q.astype(np.float64) * scale[:, np.newaxis].astype(np.float64)
    return q, scale.astype(np.float64), np.linalg.norm(lost, axis=1) + ERROR_SLACK


def rows(ids: np.ndarray, agents: list[str], copies: Copies) -> list[tuple[int, str, float, float, bytes]]:
    """UPSERT's parameters for these memories' int8 copies (:func:`quantized`)."""
    q, scale, error = copies
    return [
        (int(i), agent, float(s), float(e), row.tobytes())
        for i, agent, s, e, row in zip(ids, agents, scale, error, q, strict=True)
    ]


async def backfill(db: Database, *, chunk: int = BACKFILL_CHUNK) -> int:
    """Build the copies a store of the previous version lacks (``memory_vectors_q8_backfill``), a
    chunk per write transaction that reads the float32 vectors and writes their copies, so a
    vector written meanwhile is never copied stale. How many were built; 0 when none was left."""
    built = 0
    started = time.monotonic()
    while True:
        async with db.transaction() as tx:
            cursor = await tx.fetchone("SELECT after FROM memory_vectors_q8_backfill")
            if cursor is None:
                return built
            if built == 0:
                left = await tx.fetchone("SELECT count(*) FROM memory_vectors WHERE memory_id > ?", cursor)
                logger.info(
                    "building the int8 copies of %d memory vectors in the background; until a "
                    "vector has one, recall reads its float32 vector",
                    left[0] if left else 0,
                )
            found = await tx.fetchall(
                "SELECT memory_id, agent, embedding FROM memory_vectors WHERE memory_id > ? "
                "ORDER BY memory_id LIMIT ?",
                (cursor[0], chunk),
            )
            if not found:
                await tx.execute("DELETE FROM memory_vectors_q8_backfill")
                logger.info("int8 copies built: %d in %.1f s", built, time.monotonic() - started)
                return built
            dim = len(found[0][2]) // 4
            unit = np.frombuffer(b"".join(row[2] for row in found), dtype=np.float32).reshape(len(found), dim)
            ids = np.array([row[0] for row in found], dtype=np.int64)
            await tx.executemany(UPSERT, rows(ids, [str(row[1]) for row in found], quantized(unit)))
            await tx.execute("UPDATE memory_vectors_q8_backfill SET after = ?", (int(found[-1][0]),))
        built += len(found)


async def keep_backfilling(db: Database) -> None:
    """:func:`backfill` until it is done; a database error (a full disk) is logged and retried."""
    while True:
        try:
            await backfill(db)
        except sqlite3.Error as exc:
            logger.warning(
                "int8 copies of the memory vectors not built yet (%s); retrying in %g s "
                "(recall reads the float32 vectors meanwhile)",
                exc,
                BACKFILL_RETRY_S,
            )
            await anyio.sleep(BACKFILL_RETRY_S)
            continue
        return


async def bounds(
    db: Reads, agent: str, query: np.ndarray, ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids found, estimated cosine, error) of those of ``ids`` that are ``agent``'s vectors: the
    exact cosine of each with the unit ``query`` lies within ``error`` of its estimate. While
    :func:`backfill` has copies left to build, an id without one is given estimate 0 and error
    :data:`UNBOUNDED` (it may or may not be ``agent``'s vector: reading it tells)."""
    rows: list[tuple[Any, ...]] = await db.fetchall(
        # By primary key, the agent checked on each row: see VectorSearch._rerank. The backfill's
        # cursor comes in the same statement (a row of NULLs while copies are left to build), so
        # the copies and the state of their build are read from one snapshot, in one trip (its one
        # row is rowid 1: the migration inserts it into the empty table).
        "SELECT memory_id, scale, error, q FROM memory_vectors_q8 "
        "WHERE memory_id IN (SELECT value FROM json_each(?)) AND +agent = ? "
        "UNION ALL SELECT NULL, NULL, NULL, NULL FROM memory_vectors_q8_backfill WHERE rowid = 1",
        (ids_json(ids), agent),
    )
    found = [row for row in rows if row[0] is not None]
    pending = len(found) < len(rows)
    n = len(found)
    known, (q, scale, error) = copies_of(found, query.size)
    estimate = estimates(q, scale, query)
    if not pending or n == ids.size:
        return known, estimate, error
    unknown = np.setdiff1d(ids, known)
    return (
        np.concatenate([known, unknown]),
        np.concatenate([estimate, np.zeros(unknown.size)]),
        np.concatenate([error, np.full(unknown.size, UNBOUNDED)]),
    )


def estimates(q: np.ndarray, scale: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each copy's estimate of its vector's cosine with the unit ``query`` (within its error)."""
    return np.asarray((q.astype(np.float32) @ query).astype(np.float64) * scale)


def possible_nearest(estimate: np.ndarray, error: np.ndarray, k: int) -> np.ndarray:
    """Positions of the rows that may be among the ``k`` of highest cosine: those whose upper bound
    reaches the k-th highest lower bound."""
    if estimate.size <= k:
        return np.arange(estimate.size)
    low = estimate - error
    kth = np.partition(low, low.size - k)[low.size - k]
    return np.flatnonzero(estimate + error >= kth)
