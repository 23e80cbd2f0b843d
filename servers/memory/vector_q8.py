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

Written in the same transaction as the float32 row (``vector_search``), so the two never disagree;
a store of an older version gets the table from its float32 vectors when it is first opened
(``vectors_0002_memory_vectors_q8``: about 20 s per million vectors).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np

from servers.memory.vector_cache import ids_json
from shared.db import Reads

ERROR_SLACK = 1e-5
"""Added to each stored error: the float32 arithmetic of a bound may round either way."""
_BACKFILL_CHUNK = 50_000

UPSERT = (
    "INSERT INTO memory_vectors_q8(memory_id, agent, scale, error, q) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT(memory_id) DO UPDATE SET agent = excluded.agent, scale = excluded.scale, "
    "error = excluded.error, q = excluded.q"
)


def quantized(unit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, scale, error) of each row of the unit (n, dim) float32 matrix."""
    scale = np.maximum(np.abs(unit).max(axis=1), np.float32(1e-30)) / np.float32(127)
    q = np.rint(unit / scale[:, np.newaxis]).astype(np.int8)
    lost = unit.astype(np.float64) - q.astype(np.float64) * scale[:, np.newaxis].astype(np.float64)
    return q, scale.astype(np.float64), np.linalg.norm(lost, axis=1) + ERROR_SLACK


def rows(ids: np.ndarray, agents: list[str], unit: np.ndarray) -> list[tuple[int, str, float, float, bytes]]:
    """UPSERT's parameters for these memories' unit vectors."""
    q, scale, error = quantized(unit)
    return [
        (int(i), agent, float(s), float(e), row.tobytes())
        for i, agent, s, e, row in zip(ids, agents, scale, error, q, strict=True)
    ]


def create_q8(conn: sqlite3.Connection) -> None:
    """The table, filled from the float32 vectors already stored, a chunk at a time."""
    from servers.memory.vectors import Q8_TABLE

    conn.execute(Q8_TABLE)
    after = -(2**63)
    while True:
        found = conn.execute(
            "SELECT memory_id, agent, embedding FROM memory_vectors WHERE memory_id > ? "
            "ORDER BY memory_id LIMIT ?",
            (after, _BACKFILL_CHUNK),
        ).fetchall()
        if not found:
            return
        dim = len(found[0][2]) // 4
        unit = np.frombuffer(b"".join(row[2] for row in found), dtype=np.float32).reshape(len(found), dim)
        ids = np.array([row[0] for row in found], dtype=np.int64)
        conn.executemany(UPSERT, rows(ids, [str(row[1]) for row in found], unit))
        after = int(found[-1][0])


async def bounds(
    db: Reads, agent: str, query: np.ndarray, ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids found, estimated cosine, error) of those of ``ids`` that are ``agent``'s vectors: the
    exact cosine of each with the unit ``query`` lies within ``error`` of its estimate."""
    found: list[tuple[Any, ...]] = await db.fetchall(
        # By primary key, the agent checked on each row: see VectorSearch._rerank.
        "SELECT memory_id, scale, error, q FROM memory_vectors_q8 "
        "WHERE memory_id IN (SELECT value FROM json_each(?)) AND +agent = ?",
        (ids_json(ids), agent),
    )
    n = len(found)
    dim = query.size
    q = np.frombuffer(b"".join(row[3] for row in found), dtype=np.int8).reshape(n, dim)
    scale = np.fromiter((row[1] for row in found), dtype=np.float64, count=n)
    error = np.fromiter((row[2] for row in found), dtype=np.float64, count=n)
    estimate = (q.astype(np.float32) @ query).astype(np.float64) * scale
    return np.fromiter((row[0] for row in found), dtype=np.int64, count=n), estimate, error


def possible_nearest(estimate: np.ndarray, error: np.ndarray, k: int) -> np.ndarray:
    """Positions of the rows that may be among the ``k`` of highest cosine: those whose upper bound
    reaches the k-th highest lower bound."""
    if estimate.size <= k:
        return np.arange(estimate.size)
    low = estimate - error
    kth = np.partition(low, low.size - k)[low.size - k]
    return np.flatnonzero(estimate + error >= kth)
