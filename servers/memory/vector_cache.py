"""The in-memory codes of every agent, kept in step with the memory_vectors table.

Writes update the cache at once, inside the caller's transaction, so a search in that transaction
sees them. Whether the transaction then commits or rolls back is not reported to us, so each write
also records the ids it touched with its transaction; at the next search after that transaction has
ended, those ids are read back from SQLite and the cache is made to match (`catch_up`). One task at a
time does that, and a search never waits for it: a task inside a transaction that waited here could
deadlock with a catch-up waiting for that transaction's lock.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

import anyio
import anyio.to_thread
import numpy as np

from servers.memory.heap import return_memory_to_the_system
from servers.memory.vector_codes import CodeBlock, VectorDimensionError, codes_from_blobs, words_for
from servers.memory.vector_file import Copies, Q8File, copies_of
from shared.db import Database, Transaction

logger = logging.getLogger("nexo.memory.vectors")

RESYNC_LIMIT = 50_000
"""Past this many written ids awaiting their check, the cache is rebuilt instead."""
_LOAD_CHUNK = 50_000
_IDS_CHUNK = 10_000
FILE_CHUNK = 10_000
"""Int8 copies written to an agent's file per step of :meth:`CodeCache.keep_filed` (4 MB): the
event loop is held for a few milliseconds by each."""
FILE_SLACK = 100_000
"""Records of replaced vectors a file may hold beyond its live ones before it is written anew."""
FILE_RETRY_S = 60.0


def ids_json(ids: Iterable[int] | np.ndarray) -> str:
    """Ids as one JSON parameter, read in SQL with json_each (no limit on their number)."""
    if isinstance(ids, np.ndarray):
        # tolist() makes Python ints in C: a tenth of the time of converting each numpy scalar.
        return json.dumps(ids.astype(np.int64, copy=False).tolist())
    return json.dumps([int(i) for i in ids])


@dataclass(slots=True)
class _Written:
    """Ids a transaction wrote; once it has ended the cache is checked against SQLite for them."""

    tx: Transaction | None  # None: check at the next search (ids a rerank found missing)
    ids: list[int] = field(default_factory=list)
    everything: bool = False  # rebuild the whole cache (clear(), or too many ids to check one by one)

    @property
    def ended(self) -> bool:
        return self.tx is None or not self.tx.is_open


class CodeCache:
    """Per agent, the codes of its vectors (see vector_codes.CodeBlock)."""

    def __init__(self, db: Database, dim: int) -> None:
        self.db = db
        self.dim = dim
        self.words = words_for(dim)
        self.loaded = False
        self._blocks: dict[str, CodeBlock] = {}
        self._written: list[_Written] = []
        self._written_ids = 0
        self._maintenance = anyio.Lock()
        self._unfiled = anyio.Event()
        """Set when some agent's int8 copies have no file (:meth:`keep_filed`)."""
        self._filling = False
        self._fill_ended = anyio.Event()
        """Set (then replaced) each time :meth:`keep_filed` ends a pass: :meth:`until_filed`."""
        self._no_file: str | None = None
        """Why the int8 copies cannot be kept in files, once that happened: read from SQLite."""
        self._generation = 0
        """Counts rebuilds: a fill of the blocks of an older one stops."""

    @property
    def agents(self) -> int:
        return len(self._blocks)

    def block(self, agent: str) -> CodeBlock | None:
        return self._blocks.get(agent)

    # -- changes made by writes (inside the caller's transaction) ----------------------------------

    def put(self, tx: Transaction, ids: np.ndarray, agents: list[str], codes: np.ndarray, q8: Copies) -> None:
        """``q8``: the vectors' int8 copies (``vector_q8.quantized``), row for row."""
        self._note(tx, ids.tolist())
        if not self.loaded:
            return
        groups: dict[str, list[int]] = {}
        for position, agent in enumerate(agents):
            groups.setdefault(agent, []).append(position)
        for agent, positions in groups.items():
            for other, block in self._blocks.items():
                if other != agent:
                    block.discard(ids[positions])  # the memory moved to another agent
            block = self._block(agent)
            block.upsert(
                ids[positions],
                codes[positions],
                self._append_copies(block, *(part[positions] for part in q8)),
            )

    def drop(self, tx: Transaction, agent: str, memory_id: int) -> None:
        self._note(tx, [memory_id])
        block = self._blocks.get(agent)
        if block is not None:
            block.discard(np.array([memory_id], dtype=np.int64))

    def drop_all(self, tx: Transaction, dim: int) -> None:
        self._note(tx, [], everything=True)
        self._blocks = {}
        self._generation += 1
        self.dim, self.words = dim, words_for(dim)

    def suspect(self, ids: list[int]) -> None:
        """Check these ids against SQLite at the next search (a rerank did not find their rows)."""
        self._written.append(_Written(None, ids))

    # -- the int8 copies' files (vector_file) -----------------------------------------------------

    def _append_copies(
        self, block: CodeBlock, q: np.ndarray, scale: np.ndarray, error: np.ndarray
    ) -> np.ndarray | None:
        """The slots of these copies appended to ``block``'s file; None when it has none."""
        if block.q8 is None:
            return None
        if block.q8.records > 2 * len(block) + FILE_SLACK:
            block.forget_records()  # mostly replaced vectors' records: written anew from SQLite
            self._unfiled.set()
            return None
        try:
            return block.q8.append(q, scale, error)
        except OSError as exc:
            self.give_up_files(exc)
            return None

    def give_up_files(self, exc: Exception) -> None:
        """Keep no int8 copies in files from now on (a full disk, a read-only directory): every
        search reads them from SQLite, as before the files, until the server restarts."""
        if self._no_file is None:
            self._no_file = f"{type(exc).__name__}: {exc}"
            logger.warning(
                "the int8 copies of the memory vectors cannot be kept in a file beside %s (%s); "
                "recall reads them from SQLite, slower at scale, until the memory server restarts",
                self.db.path,
                self._no_file,
            )
        for block in self._blocks.values():
            block.forget_records()

    async def keep_filed(self) -> None:
        """Run for good beside the server: after each build of the codes, give every agent a file
        of its vectors' int8 copies, written from SQLite a chunk at a time while searches go on
        (they read from SQLite the copies not in a file yet)."""
        while self._no_file is None:
            await self._unfiled.wait()
            self._unfiled = anyio.Event()
            self._filling = True
            try:
                await self._fill()
            except Exception as exc:  # a cache of its own: its fault is never the server's end
                if not isinstance(exc, sqlite3.Error):
                    logger.exception("writing the int8 copies' file failed")
                    self.give_up_files(exc)
                    return
                logger.warning(
                    "int8 copies not written to their file yet (%s); retrying in %g s", exc, FILE_RETRY_S
                )
                await anyio.sleep(FILE_RETRY_S)
                self._unfiled.set()
            finally:
                self._filling = False
                self._fill_ended.set()
                self._fill_ended = anyio.Event()

    async def until_filed(self) -> None:
        """Return once :meth:`keep_filed` has no copies left to write (at once when files were given
        up; never while no task runs it, so a caller bounds the wait)."""
        while self._no_file is None and (self._unfiled.is_set() or self._filling):
            await self._fill_ended.wait()

    def filed(self, agent: str | None = None) -> tuple[int, int]:
        """(vectors, of which with their int8 copy in the agent's file) of ``agent``, or of every
        agent (None)."""
        if agent is None:
            counts = [self.filed(name) for name in list(self._blocks)]
            return sum(n for n, _ in counts), sum(f for _, f in counts)
        block = self._blocks.get(agent)
        if block is None:
            return 0, 0
        snapshot = block.snapshot()
        return snapshot.ids.size, int(snapshot.q8_slots(snapshot.ids)[0].size)

    async def _fill(self) -> None:
        started = time.monotonic()
        generation, blocks = self._generation, dict(self._blocks)
        if not all(self._give_file(block) for block in blocks.values()):
            return
        after = -(2**63)
        while generation == self._generation and self._no_file is None:
            in_flight = self._in_flight()
            rows = await self.db.fetchall(
                "SELECT memory_id, agent, scale, error, q FROM memory_vectors_q8 WHERE memory_id > ? "
                "ORDER BY memory_id LIMIT ?",
                (after, FILE_CHUNK),
            )
            if not rows or generation != self._generation:
                break
            after = int(rows[-1][0])
            self._file_rows(blocks, rows, in_flight | self._in_flight())
        await anyio.to_thread.run_sync(return_memory_to_the_system)  # as after a rebuild
        if generation == self._generation and self._no_file is None:
            logger.info(
                "int8 copies of %d memory vectors in their file(s), read from there from now on (%.1f s)",
                self.filed()[1],
                time.monotonic() - started,
            )

    def _in_flight(self) -> set[int]:
        """Ids written by transactions that have not ended: their copies may still change."""
        return {i for written in self._written if not written.ended for i in written.ids}

    def _file_rows(
        self, blocks: dict[str, CodeBlock], rows: list[tuple[Any, ...]], in_flight: set[int]
    ) -> None:
        """Append the copies of ``rows`` (memory_id, agent, scale, error, q) that their agent's
        block holds without a record, except those of transactions that were open while the rows
        were read (checked against SQLite when they end): no await, so no write comes between the
        check and the slot."""
        pending = np.array(sorted(in_flight), dtype=np.int64)
        for agent, group in groupby(sorted(rows, key=lambda row: str(row[1])), key=lambda row: str(row[1])):
            block = blocks.get(agent)
            if block is None or block.q8 is None or self._blocks.get(agent) is not block:
                continue
            listed = list(group)
            ids = np.array([row[0] for row in listed], dtype=np.int64)
            wanted = np.setdiff1d(block.without_record(ids), pending, assume_unique=True)
            if not wanted.size:
                continue
            chosen = [listed[i] for i in np.searchsorted(ids, wanted).tolist()]
            slots = self._append_copies(block, *copies_of(chosen, self.dim)[1])
            if slots is None:
                return  # the files were given up
            block.set_slots(wanted, slots)

    def _block(self, agent: str) -> CodeBlock:
        block = self._blocks.get(agent)
        if block is None:
            block = self._blocks[agent] = CodeBlock(self.words)
            self._give_file(block)  # an agent's first vectors: their copies go straight to it
        return block

    def _give_file(self, block: CodeBlock) -> bool:
        """Give ``block`` a file of its own unless it has one; False once files are given up."""
        if block.q8 is None and self._no_file is None:
            try:
                block.q8 = Q8File(self.db.path.parent, self.dim)
            except OSError as exc:
                self.give_up_files(exc)
        return self._no_file is None

    def _note(self, tx: Transaction, ids: list[int], *, everything: bool = False) -> None:
        last = self._written[-1] if self._written else None
        if last is None or last.tx is not tx:
            last = _Written(tx)
            self._written.append(last)
        last.ids.extend(ids)
        last.everything |= everything
        self._written_ids += len(ids)
        if self._written_ids > RESYNC_LIMIT:
            for written in self._written:
                written.ids, written.everything = [], True
            self._written_ids = 0

    # -- reading SQLite back -----------------------------------------------------------------------

    async def load(self) -> None:
        async with self._maintenance:
            await self._rebuild()

    async def ensure_loaded(self) -> None:
        if not self.loaded:
            async with self._maintenance:
                if not self.loaded:  # another task may have loaded it while this one waited
                    await self._rebuild()

    async def catch_up(self) -> None:
        """Make the cache match SQLite for every id written by a transaction that has ended."""
        if not any(written.ended for written in self._written):
            return
        try:
            self._maintenance.acquire_nowait()
        except anyio.WouldBlock:
            return  # another task is at it
        try:
            ended = [written for written in self._written if written.ended]
            self._written = [written for written in self._written if not written.ended]
            self._written_ids = sum(len(written.ids) for written in self._written)
            try:
                if any(written.everything for written in ended):
                    await self._rebuild()
                else:
                    await self._resync(sorted({i for written in ended for i in written.ids}))
            except BaseException:
                self._written[:0] = ended
                raise
        finally:
            self._maintenance.release()

    async def _resync(self, ids: list[int]) -> None:
        rows: list[tuple[Any, ...]] = []
        for first in range(0, len(ids), _IDS_CHUNK):
            rows += await self.db.fetchall(
                # With each vector's int8 copy, when it has one yet (vector_q8.backfill).
                "SELECT v.agent, v.memory_id, v.code, c.scale, c.error, c.q FROM memory_vectors AS v "
                "LEFT JOIN memory_vectors_q8 AS c ON c.memory_id = v.memory_id "
                "WHERE v.memory_id IN (SELECT value FROM json_each(?)) ORDER BY v.agent, v.memory_id",
                (ids_json(ids[first : first + _IDS_CHUNK]),),
            )
        rows.sort(key=lambda row: (str(row[0]), row[1]))  # each chunk is in order, not all of them
        stored = {agent: list(group) for agent, group in groupby(rows, key=lambda row: str(row[0]))}
        checked = np.asarray(ids, dtype=np.int64)
        for agent, block in self._blocks.items():
            there = [row[1] for row in stored.get(agent, [])]
            block.discard(np.setdiff1d(checked, np.array(there, dtype=np.int64)))
        for agent, listed in stored.items():
            block = self._block(agent)
            agent_ids = np.array([row[1] for row in listed], dtype=np.int64)
            block.upsert(agent_ids, codes_from_blobs([row[2] for row in listed], self.words))
            copied, copies = copies_of([row[1:] for row in listed if row[5] is not None], self.dim)
            slots = self._append_copies(block, *copies) if copied.size else None
            if slots is not None:
                block.set_slots(copied, slots)

    async def _rebuild(self) -> None:
        row = await self.db.fetchone("SELECT length(embedding) FROM memory_vectors LIMIT 1")
        if row is not None and row[0] != self.dim * 4:
            raise VectorDimensionError(
                f"{self.db.path}: the stored memory vectors have {row[0] // 4} dimensions but the "
                f"embedder gives {self.dim}. Fix: run `nexo memory reindex` to embed every memory again "
                "with the current model, or configure the model that wrote them"
            )
        blocks: dict[str, CodeBlock] = {}
        after: tuple[str, int] = ("", -(2**63))
        while True:
            # In chunks: writes committed meanwhile are recorded in self._written and checked after.
            rows = await self.db.fetchall(
                "SELECT agent, memory_id, code FROM memory_vectors WHERE (agent, memory_id) > (?, ?) "
                "ORDER BY agent, memory_id LIMIT ?",
                (*after, _LOAD_CHUNK),
            )
            if not rows:
                break
            for agent, (ids, codes) in self._by_agent(rows):
                if agent not in blocks:
                    blocks[agent] = CodeBlock(self.words)
                blocks[agent].upsert(ids, codes)
            after = (str(rows[-1][0]), int(rows[-1][1]))
        self._blocks = blocks
        self._generation += 1
        self.loaded = True
        self._unfiled.set()
        # Each chunk's rows were garbage by the next: tens of MB of heap freed but kept by glibc.
        await anyio.to_thread.run_sync(return_memory_to_the_system)
        logger.info(
            "vector index loaded: %d vectors of %d agents", sum(map(len, blocks.values())), len(blocks)
        )

    def _by_agent(self, rows: list[tuple[Any, ...]]) -> Iterable[tuple[str, tuple[np.ndarray, np.ndarray]]]:
        """(agent, (ids, codes)) of rows ordered by agent."""
        for agent, group in groupby(rows, key=lambda row: str(row[0])):
            listed = list(group)
            ids = np.array([row[1] for row in listed], dtype=np.int64)
            yield agent, (ids, codes_from_blobs([row[2] for row in listed], self.words))
