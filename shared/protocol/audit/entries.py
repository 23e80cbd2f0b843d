"""Ledger entries: a draft to append, the entry as stored, the chain's head and its verification."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from shared.protocol.audit.bodies import BODY_KINDS, Body
from shared.protocol.audit.terms import EntryKind, ProblemKind
from shared.protocol.deferred import WireModel


class EntryDraft(WireModel):
    """An entry to append. The body stays a plain dict on the wire, so the server (not the JSON-RPC
    layer) validates it and can say exactly what is wrong."""

    kind: str
    source: str
    agent: str = ""
    goal_id: str | None = None
    subject: str = ""
    body: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(
        cls, body: Body, *, source: str, agent: str = "", goal_id: str | None = None, subject: str = ""
    ) -> EntryDraft:
        return cls(
            kind=BODY_KINDS[type(body)],
            source=source,
            agent=agent,
            goal_id=goal_id,
            subject=subject,
            body=body.model_dump(mode="json"),
        )


class Entry(WireModel):
    seq: int
    at: str
    """UTC time, ISO 8601 with microseconds."""
    kind: EntryKind
    source: str
    agent: str
    goal_id: str | None = None
    subject: str
    body: dict[str, Any]
    prev_hash: str
    hash: str


class Appended(WireModel):
    seq: int
    hash: str
    at: str
    created: bool
    """False when a turn with the same (goal_id, index) was already recorded: this is that entry."""


class Head(WireModel):
    """The newest entry: record it somewhere else to detect a truncated tail later."""

    seq: int = Field(ge=0)
    hash: str


class Problem(WireModel):
    seq: int
    kind: ProblemKind
    detail: str


class VerifyReport(WireModel):
    ok: bool
    checked: int
    """Entries whose hash was recomputed."""
    head: Head
    removed: int
    """Entries removed by retention, as recorded by checkpoints."""
    checkpoints: int
    problem: Problem | None = None
    """The first bad entry (lowest seq); None when the chain is intact."""
