"""Conversation transcripts: resolve a session by key, append to it, read its history, collect idle ones."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shared.protocol.deferred import WireModel, WireParams, WireRequest, WireResult
from shared.protocol.memory.memory_md import Promotion
from shared.protocol.memory.meta import AgentId
from shared.protocol.memory.records import MAX_PAGE

Role = Literal["user", "assistant", "tool", "system"]
ROLES: tuple[Role, ...] = ("user", "assistant", "tool", "system")

SESSION_KEY_MAX = 256
MAX_APPEND = 100


class TranscriptEntry(WireModel):
    role: Role
    content: str
    turn_id: str | None = Field(None, max_length=128)
    dedupe_key: str | None = Field(None, max_length=256)
    """Resending an entry with the same key to the same session stores it once (safe retries)."""


class StoredEntry(WireModel):
    id: int
    role: Role
    content: str
    turn_id: str | None = None
    at: float


class SessionResolveParams(WireParams):
    agent: AgentId
    session_key: str = Field(min_length=1, max_length=SESSION_KEY_MAX)


class SessionResolveResult(WireResult):
    session_id: int
    created: bool
    """False when the conversation already existed: reattach to it instead of starting over."""
    previous_active_at: float | None = None
    entries: int


class SessionAppendParams(WireParams):
    agent: AgentId
    session_id: int
    entries: list[TranscriptEntry] = Field(min_length=1, max_length=MAX_APPEND)


class SessionAppendResult(WireResult):
    appended: int
    duplicates: int
    trimmed: int
    """Oldest entries dropped to keep the session within its transcript cap."""
    consolidated: bool
    """True when these assistant turns triggered a consolidation pass."""
    promotions: list[Promotion] = Field(default_factory=list)
    """What that pass promoted; the orchestrator records one ``memory_promotion`` entry for each."""


class SessionHistoryParams(WireParams):
    agent: AgentId
    session_id: int
    limit: int = Field(50, ge=1, le=MAX_PAGE)


class SessionHistoryResult(WireResult):
    entries: list[StoredEntry]
    """Oldest first: the last ``limit`` entries of the session."""


class SessionGcParams(WireParams):
    idle_s: float | None = Field(None, gt=0)
    """Remove sessions idle longer than this; default from the server's settings."""


class SessionGcResult(WireResult):
    removed: int


class SessionResolveRequest(WireRequest[SessionResolveParams, Literal["nexo/memory/session/resolve"]]):
    method: Literal["nexo/memory/session/resolve"] = "nexo/memory/session/resolve"


class SessionAppendRequest(WireRequest[SessionAppendParams, Literal["nexo/memory/session/append"]]):
    method: Literal["nexo/memory/session/append"] = "nexo/memory/session/append"


class SessionHistoryRequest(WireRequest[SessionHistoryParams, Literal["nexo/memory/session/history"]]):
    method: Literal["nexo/memory/session/history"] = "nexo/memory/session/history"


class SessionGcRequest(WireRequest[SessionGcParams, Literal["nexo/memory/session/gc"]]):
    method: Literal["nexo/memory/session/gc"] = "nexo/memory/session/gc"
