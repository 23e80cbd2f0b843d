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
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

import anyio
import numpy as np

from servers.memory.vector_codes import CodeBlock, VectorDimensionError, codes_from_blobs, words_for
from shared.db import Database, Transaction

logger = logging.getLogger("nexo.memory.vectors")

RESYNC_LIMIT = 50_000
"""Past this many written ids awaiting their check, the cache is rebuilt instead."""
_LOAD_CHUNK = 50_000
_IDS_CHUNK = 10_000


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

    @property
    def agents(self) -> int:
        return len(self._blocks)

    def block(self, agent: str) -> CodeBlock | None:
        return self._blocks.get(agent)

    # -- changes made by writes (inside the caller's transaction) ----------------------------------

    def put(self, tx: Transaction, ids: np.ndarray, agents: list[str], codes: np.ndarray) -> None:
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
            self._block(agent).upsert(ids[positions], codes[positions])

    def drop(self, tx: Transaction, agent: str, memory_id: int) -> None:
        self._note(tx, [memory_id])
        block = self._blocks.get(agent)
        if block is not None:
            block.discard(np.array([memory_id], dtype=np.int64))

    def drop_all(self, tx: Transaction, dim: int) -> None:
        self._note(tx, [], everything=True)
        self._blocks = {}
        self.dim, self.words = dim, words_for(dim)

    def suspect(self, ids: list[int]) -> None:
        """Check these ids against SQLite at the next search (a rerank did not find their rows)."""
        self._written.append(_Written(None, ids))

    def _block(self, agent: str) -> CodeBlock:
        block = self._blocks.get(agent)
        if block is None:
            block = self._blocks[agent] = CodeBlock(self.words)
        return block

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
                "SELECT agent, memory_id, code FROM memory_vectors "
                "WHERE memory_id IN (SELECT value FROM json_each(?)) ORDER BY agent, memory_id",
                (ids_json(ids[first : first + _IDS_CHUNK]),),
            )
        stored = dict(self._by_agent(rows))
        checked = np.asarray(ids, dtype=np.int64)
        for agent, block in self._blocks.items():
            there = stored[agent][0] if agent in stored else np.empty(0, dtype=np.int64)
            block.discard(np.setdiff1d(checked, there))
        for agent, (agent_ids, codes) in stored.items():
            self._block(agent).upsert(agent_ids, codes)

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
        self.loaded = True
        logger.info(
            "vector index loaded: %d vectors of %d agents", sum(map(len, blocks.values())), len(blocks)
        )

    def _by_agent(self, rows: list[tuple[Any, ...]]) -> Iterable[tuple[str, tuple[np.ndarray, np.ndarray]]]:
        """(agent, (ids, codes)) of rows ordered by agent."""
        for agent, group in groupby(rows, key=lambda row: str(row[0])):
            listed = list(group)
            ids = np.array([row[1] for row in listed], dtype=np.int64)
            yield agent, (ids, codes_from_blobs([row[2] for row in listed], self.words))
