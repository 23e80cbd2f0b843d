"""Long-term memories in SQLite: rows, their FTS5 entries and their vectors, always written together.

The full-text index is an external-content FTS5 table kept in step by triggers
(``servers.memory.memory_schema``), and the vector index is written by the same transaction as the
row, so a memory, its FTS entry and its vector commit or roll back as one. Every query names one
agent: no call reads across agents by accident. No MCP imports: the tools and the control plane
live in ``server.py`` and ``admin.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from servers.memory.access import AccessLog
from servers.memory.keyword import KeywordQuery, Term
from servers.memory.keyword_rank import RANK_CAP, Ranked, ranked, totals
from servers.memory.memory_rows import COLUMNS, INSERT, ids_of, insert_row, rows_by_id
from servers.memory.models import Counts, Memory, NewMemory, Stored, Vector, content_hash
from servers.memory.terms import count_documents, documents
from servers.memory.vectors import VectorIndex
from shared.db import Database, Reads, Transaction

if TYPE_CHECKING:
    import numpy as np

ARCHIVE_CHUNK = 50_000
"""Ids per statement when archiving: a pass over a million memories archives nearly all of them,
and one statement's JSON of every id held them all as Python objects at once."""


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


class MemoryStore:
    """Memories of every agent in one database; each method is scoped to the agent it is given."""

    def __init__(
        self,
        db: Database,
        index: VectorIndex,
        *,
        reader: Reads | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.reads: Reads = db if reader is None else reader
        """Where the keyword side of recall reads: a connection of its own (``Database.reader()``), so a
        hybrid recall's keyword reads overlap the vector side's on ``db``; ``db`` itself when none."""
        self.index = index
        self._clock = clock
        self.access = AccessLog(db, clock)

    # -- writes --------------------------------------------------------------------------------

    async def find_content(self, agent: str, content: str) -> Memory | None:
        row = await self.db.fetchone(
            f"SELECT {COLUMNS} FROM memories WHERE agent = ? AND content_sha256 = ?",
            (agent, content_hash(content)),
        )
        return None if row is None else Memory.from_row(row)

    async def refresh(self, memory_id: int, *, tags: Iterable[str] = (), importance: float = 0.0) -> Memory:
        """Mark a memory as seen again: newer access time, one more access, merged tags, un-archived."""
        async with self.db.transaction() as tx:
            return await self._refresh(tx, memory_id, tags, importance)

    async def _refresh(
        self, tx: Transaction, memory_id: int, tags: Iterable[str], importance: float
    ) -> Memory:
        row = await tx.fetchone(f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,))
        if row is None:
            raise LookupError(f"memory {memory_id} vanished during a refresh")
        old = Memory.from_row(row)
        merged = list(old.tags) + [tag for tag in tags if tag not in old.tags]
        updated = await tx.fetchall(
            "UPDATE memories SET last_accessed_at = ?, access_count = access_count + 1, archived = 0, "
            "importance = max(importance, ?), tags = ? WHERE id = ? RETURNING content, tags",
            (self._clock(), importance, json.dumps(merged, ensure_ascii=False), memory_id),
        )
        if len(merged) > len(old.tags):
            (content, new_tags), old_tags = updated[0], json.dumps(list(old.tags), ensure_ascii=False)
            await count_documents(tx, added=[(content, new_tags)], removed=[(content, old_tags)])
        fresh = await tx.fetchone(f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,))
        assert fresh is not None
        return Memory.from_row(fresh)

    async def add(self, new: NewMemory, vector: Vector) -> Stored:
        """Insert the memory with its FTS entry and vector in one transaction (or refresh its twin)."""
        async with self.db.transaction() as tx:
            return await self._add(tx, new, vector)

    async def add_many(self, batch: Sequence[tuple[NewMemory, Vector]]) -> list[Stored]:
        """Like :meth:`add` for a batch, all in one transaction (one fsync) and a few statements.

        The twins already stored are looked up in one query, the new memories inserted with one
        statement (their full-text entries by the trigger) and read back with another, and their
        vectors written with one more; only twins are refreshed one by one. Content repeated
        within the batch is stored once and refreshed by its repeats, as consecutive :meth:`add`
        calls would.
        """
        if not batch:
            return []
        keys = [(new.agent, content_hash(new.content)) for new, _ in batch]
        async with self.db.transaction() as tx:
            stored_ids = await ids_of(tx, keys)
            first = {key: position for position, key in reversed(list(enumerate(keys)))}
            fresh = [p for key, p in first.items() if key not in stored_ids]
            fresh.sort()
            now = self._clock()
            inserts = [insert_row(batch[p][0], keys[p][1], now) for p in fresh]
            await tx.executemany(INSERT, inserts)
            await count_documents(tx, added=[(row[1], row[3]) for row in inserts])
            inserted = await ids_of(tx, [keys[p] for p in fresh])
            await self.index.add_many(tx, [(inserted[keys[p]], keys[p][0], batch[p][1]) for p in fresh])
            rows = await rows_by_id(tx, list(inserted.values()))
            results: list[Stored] = []
            for position, (new, _) in enumerate(batch):
                key = keys[position]
                if first[key] == position and key in inserted:
                    results.append(Stored(rows[inserted[key]], created=True))
                else:
                    memory_id = stored_ids.get(key, inserted.get(key))
                    assert memory_id is not None
                    refreshed = await self._refresh(tx, memory_id, new.tags, new.importance)
                    results.append(Stored(refreshed, created=False))
            return results

    async def _add(self, tx: Transaction, new: NewMemory, vector: Vector) -> Stored:
        digest = content_hash(new.content)
        # Checked again inside the transaction: another task may have stored the same content since.
        twin = await tx.fetchone(
            "SELECT id FROM memories WHERE agent = ? AND content_sha256 = ?", (new.agent, digest)
        )
        if twin is not None:
            return Stored(await self._refresh(tx, int(twin[0]), new.tags, new.importance), created=False)
        inserted = insert_row(new, digest, self._clock())
        memory_id = await tx.insert(INSERT, inserted)
        await count_documents(tx, added=[(inserted[1], inserted[3])])
        await self.index.add(tx, memory_id, new.agent, vector)
        row = await tx.fetchone(f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,))
        assert row is not None
        return Stored(Memory.from_row(row), created=True)

    async def forget(self, memory_id: int) -> Memory | None:
        """Delete a memory, its FTS entry and its vector together; None if there was none."""
        async with self.db.transaction() as tx:
            row = await tx.fetchone(f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,))
            if row is None:
                return None
            await self.index.remove(tx, memory_id)
            text = await tx.fetchall(
                "DELETE FROM memories WHERE id = ? RETURNING content, tags", (memory_id,)
            )
            await count_documents(tx, removed=[(str(text[0][0]), str(text[0][1]))])
        return Memory.from_row(row)

    def touch(self, memory_ids: Sequence[int]) -> None:
        """Record that these memories were recalled now, which brings an archived one back into the
        working set. Noted in memory and written by :meth:`flush_access` (``servers.memory.access``):
        a recall never writes."""
        self.access.note(memory_ids)

    async def flush_access(self) -> int:
        """Write the accesses noted by :meth:`touch` (one transaction); how many memories it updated."""
        return await self.access.flush()

    async def set_archived(self, memory_ids: Sequence[int] | np.ndarray, archived: bool) -> None:
        """Archive (or bring back) these memories; any number of them, in one transaction.

        The ids go as JSON parameters, ``ARCHIVE_CHUNK`` per statement: a pass over a million
        memories archives nearly all of them, past SQLite's limit on bound parameters (250,000 here).
        """
        if not len(memory_ids):
            return
        async with self.db.transaction() as tx:
            for start in range(0, len(memory_ids), ARCHIVE_CHUNK):
                chunk = memory_ids[start : start + ARCHIVE_CHUNK]
                await tx.execute(
                    "UPDATE memories SET archived = ? WHERE id IN (SELECT value FROM json_each(?))",
                    (int(archived), json.dumps([int(memory_id) for memory_id in chunk])),
                )

    async def mark_promoted(self, memory_id: int) -> None:
        await self.db.execute("UPDATE memories SET promoted_at = ? WHERE id = ?", (self._clock(), memory_id))

    # -- reads ---------------------------------------------------------------------------------

    async def get(self, memory_id: int) -> Memory | None:
        row = await self.db.fetchone(f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,))
        return None if row is None else Memory.from_row(row)

    async def by_ids(self, agent: str, memory_ids: Sequence[int]) -> dict[int, Memory]:
        """The agent's memories among ``memory_ids`` (other agents' are left out), read on ``reads``."""
        if not memory_ids:
            return {}
        rows = await self.reads.fetchall(
            # By primary key, the agent checked on each row (`+agent`): through the agent index
            # instead, SQLite walked all of the agent's entries (150 ms at a million memories).
            f"SELECT {COLUMNS} FROM memories WHERE +agent = ? AND id IN ({_placeholders(len(memory_ids))})",
            (agent, *memory_ids),
        )
        return {memory.id: memory for memory in map(Memory.from_row, rows)}

    async def page(
        self,
        *,
        agent: str | None,
        kind: str | None = None,
        after_id: int = 0,
        limit: int = 100,
        include_archived: bool = True,
    ) -> list[Memory]:
        """Memories in id order after ``after_id``; every agent's when ``agent`` is None."""
        await self.flush_access()
        where, params = _page_filter(agent, kind, after_id, include_archived)
        rows = await self.db.fetchall(
            f"SELECT {COLUMNS} FROM memories {where} ORDER BY id LIMIT ?", [*params, limit]
        )
        return [Memory.from_row(row) for row in rows]

    async def count_page(
        self, *, agent: str | None, kind: str | None = None, after_id: int = 0, include_archived: bool = True
    ) -> int:
        """How many memories :meth:`page` would walk through from ``after_id`` to the end."""
        await self.flush_access()
        where, params = _page_filter(agent, kind, after_id, include_archived)
        row = await self.db.fetchone(f"SELECT COUNT(*) FROM memories {where}", params)
        return int(row[0]) if row is not None else 0

    async def active_scores(self, agent: str, after_id: int, limit: int) -> list[tuple[Any, ...]]:
        """What consolidation scores, for up to ``limit`` of the agent's memories that are not
        archived, in id order after ``after_id``: (id, importance, created_at, last_accessed_at,
        access_count, provenance, promoted_at). Never the text: a pass over a million memories
        holds these figures, not the memories."""
        await self.flush_access()
        return await self.db.fetchall(
            "SELECT id, importance, created_at, last_accessed_at, access_count, provenance, promoted_at "
            "FROM memories WHERE agent = ? AND archived = 0 AND id > ? ORDER BY id LIMIT ?",
            (agent, after_id, limit),
        )

    async def keyword(
        self, agent: str, query: KeywordQuery, k: int, *, cap: int = RANK_CAP, allow_fts5: bool = True
    ) -> Ranked:
        """(id, BM25 score) of the agent's ``k`` best memories for ``query``, best first, ranking at
        most ``cap`` candidates (``servers.memory.keyword_rank``; ``allow_fts5=False`` never by
        FTS5's ``bm25()``). Scores are positive: higher is better. Archived memories are searched
        like the others."""
        return await ranked(self.reads, agent, query, k, cap=cap, allow_fts5=allow_fts5)

    async def holders(self, agent: str, match: str, k: int) -> list[int]:
        """Up to ``k`` of the agent's memories matching ``match``, unranked (no BM25 is computed)."""
        rows = await self.reads.fetchall(
            # CROSS JOIN keeps the full-text index the outer loop: without it SQLite 3.40 walks
            # every memory of the agent and evaluates the MATCH once per memory (seconds at 1M).
            "SELECT m.id FROM memories_fts CROSS JOIN memories AS m ON m.id = memories_fts.rowid "
            "WHERE memories_fts MATCH ? AND m.agent = ? LIMIT ?",
            (match, agent, k),
        )
        return [int(row[0]) for row in rows]

    async def indexed(self) -> int:
        """The number of memories in the full-text index, over every agent (BM25's N)."""
        return (await totals(self.reads)).rows

    async def term_documents(self, terms: Sequence[Term], at_most: int) -> list[int]:
        """How many memories (of every agent) hold each term: a word's count read from the side table
        (``servers.memory.terms``), a phrase's or a prefix's counted up to ``at_most``."""
        words = [term.words[0] for term in terms if len(term.words) == 1 and not term.prefix]
        counted = await documents(self.reads, words)
        walked = [term for term in terms if len(term.words) > 1 or term.prefix]
        probed = dict(zip(walked, await self.held_by([term.fts for term in walked], at_most), strict=True))
        return [probed[term] if term in probed else counted.get(term.words[0], 0) for term in terms]

    async def held_by(self, matches: Sequence[str], at_most: int) -> list[int]:
        """For each FTS5 expression, how many memories (of every agent) match it, counting up to ``at_most``.

        One statement; each count walks at most ``at_most`` entries of the index.
        """
        if not matches:
            return []
        count = "(SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?))"
        row = await self.reads.fetchone(
            "SELECT " + ", ".join([count] * len(matches)),
            [value for match in matches for value in (match, at_most)],
        )
        assert row is not None
        return [int(value) for value in row]

    async def nearest(self, agent: str, vector: Vector, k: int) -> list[int]:
        """Ids of the agent's nearest memories by cosine distance, best first."""
        return [memory_id for memory_id, _ in await self.neighbours(agent, vector, k)]

    async def neighbours(self, agent: str, vector: Vector, k: int) -> list[tuple[int, float]]:
        """(id, cosine similarity) of the agent's ``k`` nearest memories, best first.

        Every memory of the agent is eligible, archived ones too, and the index holds exactly
        those: it keeps one agent's vectors apart from another's and deletes a memory's vector in
        the transaction that deletes the memory. So nothing is dropped after the search, and ``k``
        neighbours come back whenever the agent has ``k`` memories (fewer only when it has fewer).
        """
        hits = await self.index.search(agent, vector, k)
        return [(memory_id, 1.0 - distance) for memory_id, distance in hits]

    async def ceilings(self, agent: str, vector: Vector, memory_ids: Sequence[int]) -> dict[int, float]:
        """For each of ``memory_ids`` that the agent holds, a cosine similarity to ``vector`` its own
        is certainly not above (from the int8 copies of the vectors), read on ``reads``."""
        return await self.index.ceilings(agent, vector, memory_ids, via=self.reads)

    async def similarities(
        self, agent: str, vector: Vector, memory_ids: Sequence[int], *, reader: bool = False
    ) -> dict[int, float]:
        """The cosine similarity to ``vector`` of each of ``memory_ids`` that the agent holds; read on
        ``reads`` with ``reader`` (beside a vector search on the writer), else on the writer."""
        distances = await self.index.distances(agent, vector, memory_ids, via=self.reads if reader else None)
        return {memory_id: 1.0 - distance for memory_id, distance in distances.items()}

    async def count(self, *, agent: str | None = None) -> int:
        if agent is None:
            row = await self.db.fetchone("SELECT count(*) FROM memories")
        else:
            row = await self.db.fetchone("SELECT count(*) FROM memories WHERE agent = ?", (agent,))
        return int(row[0]) if row else 0

    async def states(self) -> tuple[int, int]:
        """(memories, of which archived): one pass over the (agent, archived, id) index, about 80 ms
        at a million, where :meth:`counts` also groups every row by kind and provenance (1.5 s)."""
        row = await self.db.fetchone("SELECT count(*), total(archived) FROM memories")
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def count_upto(self, last_id: int) -> int:
        row = await self.db.fetchone("SELECT count(*) FROM memories WHERE id <= ?", (last_id,))
        return int(row[0]) if row else 0

    async def counts(self) -> Counts:
        async def grouped(column: str) -> dict[str, int]:
            rows = await self.db.fetchall(
                f"SELECT {column}, count(*) FROM memories GROUP BY {column} ORDER BY {column}"
            )
            return {str(key): int(n) for key, n in rows}

        archived = await self.db.fetchone("SELECT count(*) FROM memories WHERE archived = 1")
        return Counts(
            total=await self.count(),
            archived=int(archived[0]) if archived else 0,
            by_agent=await grouped("agent"),
            by_kind=await grouped("kind"),
            by_provenance=await grouped("provenance"),
        )

    # -- metadata ------------------------------------------------------------------------------

    async def meta(self, key: str) -> str | None:
        row = await self.db.fetchone("SELECT value FROM memory_meta WHERE key = ?", (key,))
        return None if row is None else str(row[0])

    async def set_meta(self, values: dict[str, str | None], tx: Transaction | None = None) -> None:
        """Set (or with None, delete) metadata keys, all in one transaction."""
        if tx is None:
            async with self.db.transaction() as own:
                await self.set_meta(values, own)
            return
        for key, value in values.items():
            if value is None:
                await tx.execute("DELETE FROM memory_meta WHERE key = ?", (key,))
            else:
                await tx.execute(
                    "INSERT INTO memory_meta (key, value) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )


def _page_filter(
    agent: str | None, kind: str | None, after_id: int, include_archived: bool
) -> tuple[str, list[Any]]:
    sql = "WHERE id > ?"
    params: list[Any] = [after_id]
    if agent is not None:
        sql += " AND agent = ?"
        params.append(agent)
    if kind is not None:
        sql += " AND kind = ?"
        params.append(kind)
    if not include_archived:
        sql += " AND archived = 0"
    return sql, params
