"""The vector index's search and writes: nearest memories of one agent, fast at a million entries.

Durable state is one SQLite table, written through the caller's transaction so a memory and its
vector commit or roll back together: per memory the float32 vector (unit length) and its sign-bit
code (48 bytes for 384 dimensions), with a covering index on (agent, memory_id, code). A search
ranks the agent's codes in memory with numpy (Hamming distance, then the float query against the
codes' signs; see vector_codes) and reranks the best few hundred exactly: their int8 copies
(vector_q8, read from their file: vector_file) bound each one's cosine, and the float32 vectors of
only those that may be among the nearest are read from SQLite. The codes in memory are a cache
(vector_cache): built by the first search (or `load()`), updated at once by writes and checked
against SQLite after their transaction ends, so a rolled-back write leaves nothing behind. The
rerank reads only rows that exist, so even a stale cache never returns a missing memory. Agents
with no more vectors than the rerank would read are searched exactly.

Why this design, measured on a 2-core machine with 384 dimensions and one query at a time:

- numpy codes in memory, for 900k codes of one agent: Hamming distances 4-5 ms, choosing the
  nearest 3,200 by a histogram 1.7 ms, rescoring those 0.5 ms, then reading 400 float32 vectors
  from SQLite ~3.5 ms. Memory: 56 bytes per vector (56 MB per million); built by the first search
  in ~1.8 s per million from the covering index.
- sqlite-vec's `bit[384]` vec0 column with the agent as partition key, same 900k codes: 414 ms for
  k=400 and 1.5 s for k=3,200 (its KNN cost grows with k, and a useful rerank needs a large k): no
  faster than brute force over float32 (1.0 s), so rejected. An int8[384] column is a brute-force
  scan of 384 bytes per vector, eight times the bytes of a code.
- Rescoring by the float query against the signs is what keeps the rerank small: on the synthetic
  1M corpus of bench/memory_dataset.py, Hamming alone needs 1,600 reranked rows for recall@10 0.986;
  with rescoring of 8x as many codes, 400 rows reach 0.986-0.99.

End to end (bench/memory_recall.py, k=10, one agent, synthetic corpus): p50 2.4 ms at 10k, 3.5 ms
at 100k and 14.6 ms at 1M (p99 19.9 ms) with recall@10 1.00, 0.998 and 0.992, against exact search
at 12.8 ms, 117 ms and 1.12 s.

`exact=True` scans every vector of the agent: with vec_distance_cosine inside SQLite when the
connection loaded sqlite-vec, otherwise with numpy over chunks read from SQLite.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from functools import partial

import anyio
import anyio.to_thread
import numpy as np

from servers.memory import vector_q8
from servers.memory.vector_cache import CodeCache, ids_json
from servers.memory.vector_codes import Snapshot, sign_codes, unit_matrix
from shared.db import Database, Reads, Transaction

RERANK_MIN = 200
RERANK_PER_RESULT = 30
"""Rows reranked exactly per result asked for (at least RERANK_MIN), for agents past SMALL_AGENT."""
RERANK_PER_RESULT_SMALL = 20
SMALL_AGENT = 100_000
"""Up to this many vectors, an agent's search reranks RERANK_PER_RESULT_SMALL rows per result and
rescores PREFILTER_FACTOR_SMALL codes per reranked row; past it RERANK_PER_RESULT and PREFILTER_FACTOR.

Measured with ``python -m bench.rerank_sweep`` (recall's 20 neighbours, top ten against exact
search, 200 questions): at 100,000 vectors 20 per result and 8 codes per row keep 99.6 % of the
exact top ten for a third less CPU than 40 (99.9 %), and 16 codes per row gain nothing there. At a
million, 20 per result keep 98.0 %; 40 per result and 8 codes per row 99.1 %, 30 and 16 codes per
row 99.0 % for a tenth less CPU and a quarter fewer float vectors read from SQLite (the rescoring
of 9,600 codes costs 2 to 4 ms)."""
PREFILTER_FACTOR = 16
"""Codes rescored against the float query, per reranked row, after the Hamming stage (past SMALL_AGENT)."""
PREFILTER_FACTOR_SMALL = 8
THREAD_ABOVE = 200_000
"""Agents with more codes are searched on worker threads (a few ms of numpy) to keep the loop free."""
SCAN_THREADS = 2
"""Worker threads a search past THREAD_ABOVE splits its Hamming scan between (numpy releases the GIL):
the scan is the largest part of a search's CPU time at a million codes (6 to 7 ms of one core), and a
hybrid recall's keyword side mostly waits on SQLite meanwhile. One thread or two made no difference
to hybrid recall over MCP at a million (26.1 against 26.4 ms p50, questions alternating between two
servers)."""
_EXACT_CHUNK = 20_000
_UPSERT = (
    "INSERT INTO memory_vectors(memory_id, agent, code, embedding) VALUES (?, ?, ?, ?) "
    "ON CONFLICT(memory_id) DO UPDATE SET agent = excluded.agent, code = excluded.code, "
    "embedding = excluded.embedding"
)


def _memory_id(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"memory_id {value!r} is {type(value).__name__}, expected int")
    return int(value)


def _agent(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"agent {value!r} must be a non-empty string")
    return value


class VectorSearch:
    """Nearest-neighbour search over memory vectors, scoped to one agent per query (see `VectorIndex`)."""

    def __init__(self, db: Database, dim: int) -> None:
        self.db = db
        self._cache = CodeCache(db, dim)

    @property
    def agents(self) -> int:
        return self._cache.agents

    @property
    def dim(self) -> int:
        return self._cache.dim

    # -- writes: through the caller's transaction ------------------------------------------------

    async def add(self, tx: Transaction, memory_id: int, agent: str, vector: np.ndarray) -> None:
        """Store (or replace) the vector of `memory_id`; it commits or rolls back with `tx`."""
        await self.add_many(tx, [(memory_id, agent, vector)])

    async def add_many(self, tx: Transaction, rows: Sequence[tuple[int, str, np.ndarray]]) -> None:
        """`add()` for many memories (ids must not repeat), in one statement."""
        if not rows:
            return
        ids = np.array([_memory_id(row[0]) for row in rows], dtype=np.int64)
        agents = [_agent(row[1]) for row in rows]
        unique, counts = np.unique(ids, return_counts=True)
        if unique.size != ids.size:
            raise ValueError(f"memory id {int(unique[counts > 1][0])} appears more than once in add_many()")
        unit = unit_matrix(
            [row[2] for row in rows], self.dim, lambda i: f"the vector of memory {int(ids[i])}"
        )
        codes = sign_codes(unit)
        await tx.executemany(
            _UPSERT,
            (
                (int(i), agent, code.tobytes(), vector.tobytes())
                for i, agent, code, vector in zip(ids, agents, codes, unit, strict=True)
            ),
        )
        q8 = vector_q8.quantized(unit)
        await tx.executemany(vector_q8.UPSERT, vector_q8.rows(ids, agents, q8))
        self._cache.put(tx, ids, agents, codes, q8)

    async def remove(self, tx: Transaction, memory_id: int) -> None:
        """Delete the vector of `memory_id` (nothing happens when it has none)."""
        memory_id = _memory_id(memory_id)
        rows = await tx.fetchall(
            "DELETE FROM memory_vectors WHERE memory_id = ? RETURNING agent", (memory_id,)
        )
        await tx.execute("DELETE FROM memory_vectors_q8 WHERE memory_id = ?", (memory_id,))
        if rows:
            self._cache.drop(tx, str(rows[0][0]), memory_id)

    async def clear(self, tx: Transaction) -> None:
        """Delete every vector of every agent (before re-embedding them all with another model)."""
        await self.reset(tx, self.dim)

    async def reset(self, tx: Transaction, dim: int) -> None:
        """`clear()` and take vectors of `dim` dimensions from now on (a model of another size).

        The new size applies at once; should `tx` roll back, the old vectors stay and searches
        report the dimension mismatch until the index is built with their size again.
        """
        await tx.execute("DELETE FROM memory_vectors")
        await tx.execute("DELETE FROM memory_vectors_q8")
        self._cache.drop_all(tx, dim)

    # -- reads -------------------------------------------------------------------------------------

    async def load(self) -> None:
        """Build the in-memory codes from SQLite; call once after the migrations ran.

        Raises VectorDimensionError when the stored vectors have another size than `dim`.
        """
        await self._cache.load()

    async def search(
        self, agent: str, query: np.ndarray, k: int, *, exact: bool = False, exclude: Collection[int] = ()
    ) -> list[tuple[int, float]]:
        """The `k` memories of `agent` nearest to `query`: (memory_id, cosine distance), nearest first."""
        agent = _agent(agent)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k={k!r} must be a whole number >= 1")
        unit = unit_matrix([query], self.dim, lambda _: "the query vector")[0]
        await self._cache.ensure_loaded()
        await self._cache.catch_up()
        block = self._cache.block(agent)
        keep = rerank_rows(0 if block is None else len(block), k)
        if exact or block is None or len(block) <= keep:
            return await self._exact(agent, unit, k, exclude)
        snapshot = block.snapshot()
        first = rescored_codes(snapshot.ids.size, keep)
        if snapshot.ids.size > THREAD_ABOVE:
            distances = await _scanned(snapshot, unit)
            positions = await anyio.to_thread.run_sync(
                snapshot.candidates, unit, first, keep, exclude, distances
            )
        else:
            positions = snapshot.candidates(unit, first, keep, exclude)
        found, missing = await self._rerank(agent, unit, snapshot.ids[positions], k, at=(snapshot, positions))
        if missing:
            # Rows deleted behind the index's back or a write rolled back: the cache is checked
            # for them at the next search, and this one is answered from SQLite alone.
            self._cache.suspect(missing)
            if len(found) < k:
                return await self._exact(agent, unit, k, exclude)
        return found

    async def distances(
        self, agent: str, query: np.ndarray, ids: Collection[int], *, via: Reads | None = None
    ) -> dict[int, float]:
        """The cosine distance from `query` of each of `ids` that is one of `agent`'s memories (read
        through `via` when given)."""
        agent = _agent(agent)
        if not ids:
            return {}
        unit = unit_matrix([query], self.dim, lambda _: "the query vector")[0]
        candidates = np.fromiter(ids, dtype=np.int64, count=len(ids))
        found, _ = await self._rerank(agent, unit, candidates, len(ids), via or self.db)
        return dict(found)

    async def ceilings(
        self, agent: str, query: np.ndarray, ids: Collection[int], *, via: Reads | None = None
    ) -> dict[int, float]:
        """Upper bounds of the cosine similarity to `query` of each of `ids` that is `agent`'s."""
        agent = _agent(agent)
        if not ids:
            return {}
        unit = unit_matrix([query], self.dim, lambda _: "the query vector")[0]
        asked = np.fromiter(ids, dtype=np.int64, count=len(ids))
        found, estimate, error = await self._bounds(via or self.db, agent, unit, asked)
        return dict(zip(found.tolist(), (estimate + error).tolist(), strict=True))

    def filed(self, agent: str | None = None) -> tuple[int, int]:
        return self._cache.filed(agent)

    async def keep_filed(self) -> None:
        """Keep the int8 copies in a file per agent for good (``vector_cache.CodeCache.keep_filed``)."""
        await self._cache.keep_filed()

    async def until_filed(self) -> None:
        await self._cache.until_filed()

    async def _bounds(
        self,
        reads: Reads,
        agent: str,
        query: np.ndarray,
        ids: np.ndarray,
        at: tuple[Snapshot, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``vector_q8.bounds``, reading the copies in the agent's file (``vector_file``) from it
        and only the others from SQLite; ``at``: the snapshot ``ids`` were found in, and their
        positions there (a search's candidates: their records are taken from it)."""
        if at is None:
            block = self._cache.block(agent)
            snapshot = None if block is None else block.snapshot()
        else:
            snapshot = at[0]
        if snapshot is None or snapshot.q8 is None:
            return await vector_q8.bounds(reads, agent, query, ids)
        filed, slots = snapshot.q8_slots(ids) if at is None else snapshot.q8_slots_at(at[1])
        if not filed.size:
            return await vector_q8.bounds(reads, agent, query, ids)
        try:
            q, scale, error = snapshot.q8.read(slots)
        except OSError as exc:
            self._cache.give_up_files(exc)
            return await vector_q8.bounds(reads, agent, query, ids)
        estimate = vector_q8.estimates(q, scale, query)
        if filed.size == ids.size:
            return filed, estimate, error
        rest_ids, rest_estimate, rest_error = await vector_q8.bounds(
            reads, agent, query, np.setdiff1d(ids, filed)
        )
        return (
            np.concatenate([filed, rest_ids]),
            np.concatenate([estimate, rest_estimate]),
            np.concatenate([error, rest_error]),
        )

    async def _rerank(
        self,
        agent: str,
        query: np.ndarray,
        candidates: np.ndarray,
        k: int,
        db: Reads | None = None,
        at: tuple[Snapshot, np.ndarray] | None = None,
    ) -> tuple[list[tuple[int, float]], list[int]]:
        """The `k` candidates nearest to `query`, exactly: the int8 copies bound every candidate's
        cosine, and only those that may be among the `k` have their float32 vector read (``at``:
        see ``_bounds``)."""
        reads = db or self.db
        ids, estimate, error = await self._bounds(reads, agent, query, candidates, at)
        # Every candidate has its copy unless rows were deleted behind the index's back.
        missing = [] if ids.size == candidates.size else np.setdiff1d(candidates, ids).tolist()
        kept: dict[int, float] = {}
        while True:
            possible = ids[vector_q8.possible_nearest(estimate, error, k)].tolist()
            wanted = [i for i in possible if i not in kept]
            rows = await reads.fetchall(
                # By primary key, the agent checked on each row (`+agent`): searched through the
                # (agent, memory_id) index instead, 400 ids took 100 ms at a million vectors, not 3 ms.
                "SELECT memory_id, embedding FROM memory_vectors "
                "WHERE memory_id IN (SELECT value FROM json_each(?)) AND +agent = ?",
                (ids_json(wanted), agent),
            )
            if rows:
                found = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
                kept |= dict(
                    zip(
                        found.tolist(),
                        (1.0 - self._matrix([row[1] for row in rows]) @ query).tolist(),
                        strict=True,
                    )
                )
            absent = [i for i in wanted if i not in kept]
            if not absent:
                break
            # Deleted behind the index's back: the bounds are taken again without them.
            missing += absent
            present = ~np.isin(ids, absent)
            ids, estimate, error = ids[present], estimate[present], error[present]
        within = np.fromiter(kept, dtype=np.int64, count=len(kept))
        distances = np.fromiter(kept.values(), dtype=np.float32, count=len(kept))
        return _nearest(within, distances, k), missing

    async def _exact(
        self, agent: str, query: np.ndarray, k: int, exclude: Collection[int]
    ) -> list[tuple[int, float]]:
        excluded = ids_json(sorted(exclude))
        if self.db.vec_version is not None:
            rows = await self.db.fetchall(
                "SELECT memory_id, vec_distance_cosine(embedding, ?) AS distance FROM memory_vectors "
                "WHERE agent = ? AND memory_id NOT IN (SELECT value FROM json_each(?)) "
                "ORDER BY distance, memory_id LIMIT ?",
                (query.tobytes(), agent, excluded, k),
            )
            return [(int(memory_id), float(distance)) for memory_id, distance in rows]
        # Without sqlite-vec: numpy over the agent's vectors, a chunk at a time.
        best_ids = np.empty(0, dtype=np.int64)
        best = np.empty(0, dtype=np.float32)
        after = -(2**63)
        while True:
            rows = await self.db.fetchall(
                "SELECT memory_id, embedding FROM memory_vectors WHERE agent = ? AND memory_id > ? "
                "AND memory_id NOT IN (SELECT value FROM json_each(?)) ORDER BY memory_id LIMIT ?",
                (agent, after, excluded, _EXACT_CHUNK),
            )
            if not rows:
                break
            ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
            best_ids = np.concatenate([best_ids, ids])
            best = np.concatenate([best, 1.0 - self._matrix([row[1] for row in rows]) @ query])
            order = np.lexsort((best_ids, best))[:k]
            best_ids, best = best_ids[order], best[order]
            after = int(ids[-1])
        return _nearest(best_ids, best, k)

    def _matrix(self, blobs: list[bytes]) -> np.ndarray:
        return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), self.dim)


async def _scanned(snapshot: Snapshot, query: np.ndarray) -> np.ndarray:
    """Every code's Hamming distance from `query`, the scan split between SCAN_THREADS worker threads."""
    n = snapshot.ids.size
    distances = np.empty(n, dtype=np.uint16)
    bounds = [n * part // SCAN_THREADS for part in range(SCAN_THREADS + 1)]
    async with anyio.create_task_group() as tg:
        for start, stop in itertools.pairwise(bounds):
            tg.start_soon(partial(anyio.to_thread.run_sync, snapshot.scan, query, start, stop, distances))
    return distances


def rerank_rows(vectors: int, k: int) -> int:
    """How many float vectors a search for `k` results among an agent's `vectors` reranks exactly."""
    per_result = RERANK_PER_RESULT_SMALL if vectors <= SMALL_AGENT else RERANK_PER_RESULT
    return max(RERANK_MIN, per_result * k)


def rescored_codes(vectors: int, keep: int) -> int:
    """How many codes nearest by Hamming distance a search that reranks `keep` rows rescores."""
    return keep * (PREFILTER_FACTOR_SMALL if vectors <= SMALL_AGENT else PREFILTER_FACTOR)


def _nearest(ids: np.ndarray, distances: np.ndarray, k: int) -> list[tuple[int, float]]:
    order = np.lexsort((ids, distances))[:k]
    return [(int(ids[i]), float(distances[i])) for i in order]
