"""The memory server's records as plain data: what the store reads and writes. No I/O."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from shared.protocol.memory.meta import Provenance
from shared.protocol.memory.records import MemoryRecord
from shared.protocol.memory_terms import Kind

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Vector: TypeAlias = "npt.NDArray[np.float32]"
"""An embedding; a string so that importing the records imports no numpy (see ``vectors``)."""


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class NewMemory:
    agent: str
    content: str
    tags: tuple[str, ...]
    kind: Kind
    provenance: Provenance
    importance: float
    created_at: float | None = None
    last_accessed_at: float | None = None
    access_count: int = 0
    archived: bool = False


@dataclass(frozen=True, slots=True)
class Memory:
    id: int
    agent: str
    content: str
    tags: tuple[str, ...]
    kind: Kind
    provenance: Provenance
    importance: float
    created_at: float
    last_accessed_at: float
    access_count: int
    archived: bool
    promoted_at: float | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Memory:
        return cls(
            id=int(row[0]),
            agent=str(row[1]),
            content=str(row[2]),
            tags=tuple(json.loads(row[3])),
            kind=row[4],
            provenance=row[5],
            importance=float(row[6]),
            created_at=float(row[7]),
            last_accessed_at=float(row[8]),
            access_count=int(row[9]),
            archived=bool(row[10]),
            promoted_at=None if row[11] is None else float(row[11]),
        )

    def record(self) -> MemoryRecord:
        return MemoryRecord(
            id=self.id,
            agent=self.agent,
            content=self.content,
            tags=list(self.tags),
            kind=self.kind,
            provenance=self.provenance,
            importance=self.importance,
            created_at=self.created_at,
            last_accessed_at=self.last_accessed_at,
            access_count=self.access_count,
            archived=self.archived,
            promoted=self.promoted_at is not None,
        )


@dataclass(frozen=True, slots=True)
class Stored:
    memory: Memory
    created: bool
    """False when the agent already had this exact content: that memory was refreshed instead."""


@dataclass(frozen=True, slots=True)
class Counts:
    total: int
    archived: int
    by_agent: dict[str, int]
    by_kind: dict[str, int]
    by_provenance: dict[str, int]
