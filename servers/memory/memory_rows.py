"""Rows of the memories table: the columns a Memory is read from, the insert, lookups by key and id."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from servers.memory.models import Memory, NewMemory
from shared.db import Transaction

COLUMNS = (
    "id, agent, content, tags, kind, provenance, importance, created_at, last_accessed_at, "
    "access_count, archived, promoted_at"
)

INSERT = (
    "INSERT INTO memories (agent, content, content_sha256, tags, kind, provenance, importance, "
    "created_at, last_accessed_at, access_count, archived) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def insert_row(new: NewMemory, digest: str, now: float) -> tuple[Any, ...]:
    created_at = now if new.created_at is None else new.created_at
    return (
        new.agent,
        new.content,
        digest,
        json.dumps(list(new.tags), ensure_ascii=False),
        new.kind,
        new.provenance,
        new.importance,
        created_at,
        created_at if new.last_accessed_at is None else new.last_accessed_at,
        new.access_count,
        int(new.archived),
    )


async def ids_of(tx: Transaction, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """The ids of the stored memories among these (agent, content digest) keys, in one query."""
    if not keys:
        return {}
    rows = await tx.fetchall(
        "SELECT agent, content_sha256, id FROM memories WHERE (agent, content_sha256) IN "
        "(SELECT value ->> 0, value ->> 1 FROM json_each(?))",
        (json.dumps(keys),),
    )
    return {(str(agent), str(digest)): int(memory_id) for agent, digest, memory_id in rows}


async def rows_by_id(tx: Transaction, memory_ids: Sequence[int]) -> dict[int, Memory]:
    """These memories, in one query."""
    rows = await tx.fetchall(
        f"SELECT {COLUMNS} FROM memories WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(memory_ids)),),
    )
    return {memory.id: memory for memory in map(Memory.from_row, rows)}
