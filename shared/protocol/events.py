"""The wire contract for durable events from a server to the orchestrator.

Two custom JSON-RPC request methods, not tools, so they never reach any model's tool list (ours or
another MCP client's): ``nexo/events/pull`` long-polls for unacknowledged events and
``nexo/events/ack`` acknowledges handled ones. Requests work in both protocol eras and over stdio
and HTTP; pushed notifications remain a latency hint only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from pydantic import BaseModel, Field

from shared.events import MAX_PULL, EventLog, StoredEvent

EVENTS_EXTENSION = "nexo/events"
PULL_METHOD = "nexo/events/pull"
ACK_METHOD = "nexo/events/ack"
MAX_WAIT_MS = 60_000
MAX_ACK = 1_000


class Event(BaseModel):
    seq: int
    kind: str
    dedupe_key: str
    payload: dict[str, Any]
    created_at: float
    deliveries: int = 1
    """How many times this event has been handed out; >1 means a redelivery after a crash."""

    @classmethod
    def from_stored(cls, stored: StoredEvent) -> Event:
        return cls(
            seq=stored.seq,
            kind=stored.kind,
            dedupe_key=stored.dedupe_key,
            payload=stored.payload,
            created_at=stored.created_at,
            deliveries=stored.deliveries,
        )


class PullParams(types.RequestParams):
    after: int = Field(0, ge=0)
    limit: int = Field(100, ge=1, le=MAX_PULL)
    wait_ms: int = Field(0, ge=0, le=MAX_WAIT_MS)
    kinds: list[str] | None = None


class PullResult(types.Result):
    events: list[Event]
    pending: int


class AckParams(types.RequestParams):
    seqs: list[int] = Field(max_length=MAX_ACK)


class AckResult(types.Result):
    acked: int


class PullRequest(types.Request[PullParams, Literal["nexo/events/pull"]]):
    method: Literal["nexo/events/pull"] = "nexo/events/pull"


class AckRequest(types.Request[AckParams, Literal["nexo/events/ack"]]):
    method: Literal["nexo/events/ack"] = "nexo/events/ack"


LogGetter = Callable[[Any], EventLog]
"""Maps the server's lifespan state to its event log."""


class EventsExtension(Extension):
    """Serves pull and ack for a server whose lifespan state holds an :class:`EventLog`."""

    identifier = EVENTS_EXTENSION

    def __init__(self, get_log: LogGetter, *, kinds: Sequence[str] = ()) -> None:
        self._get_log = get_log
        self._kinds = list(kinds)

    def settings(self) -> dict[str, Any]:
        return {"kinds": self._kinds, "max_wait_ms": MAX_WAIT_MS}

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding(PULL_METHOD, PullParams, self._pull),
            MethodBinding(ACK_METHOD, AckParams, self._ack),
        )

    async def _pull(self, ctx: ServerRequestContext[Any, Any], params: PullParams) -> PullResult:
        log = self._get_log(ctx.lifespan_context)
        stored = await log.pull(
            after=params.after, limit=params.limit, wait_s=params.wait_ms / 1000, kinds=params.kinds
        )
        return PullResult(events=[Event.from_stored(e) for e in stored], pending=await log.pending_count())

    async def _ack(self, ctx: ServerRequestContext[Any, Any], params: AckParams) -> AckResult:
        log = self._get_log(ctx.lifespan_context)
        return AckResult(acked=await log.ack(params.seqs))


def experimental_events_capability(kinds: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The handshake-era advertisement (extensions only appear in 2026-07-28 discovery)."""
    return {EVENTS_EXTENSION: {"kinds": list(kinds), "max_wait_ms": MAX_WAIT_MS}}
