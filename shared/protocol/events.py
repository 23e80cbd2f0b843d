"""The wire contract for durable events from a server to the orchestrator.

Two custom JSON-RPC request methods, not tools, so they never reach any model's tool list (ours or
another MCP client's): ``nexo/events/pull`` long-polls for unacknowledged events and
``nexo/events/ack`` acknowledges handled ones. Requests work in both protocol eras and over stdio
and HTTP; pushed notifications remain a latency hint only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from pydantic import Field

from shared.events import MAX_PULL, EventLog, StoredEvent
from shared.protocol.deferred import WireModel, WireParams, WireRequest, WireResult
from shared.protocol.storage import refusing_full_storage

EVENTS_EXTENSION = "nexo/events"
PULL_METHOD = "nexo/events/pull"
ACK_METHOD = "nexo/events/ack"
DEAD_LETTER_METHOD = "nexo/events/dead_letter"
DEAD_LIST_METHOD = "nexo/events/dead_list"
REPLAY_METHOD = "nexo/events/replay"
PURGE_DEAD_METHOD = "nexo/events/purge_dead"
MAX_WAIT_MS = 60_000
MAX_ACK = 1_000


class Event(WireModel):
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


class PullParams(WireParams):
    after: int = Field(0, ge=0)
    limit: int = Field(100, ge=1, le=MAX_PULL)
    wait_ms: int = Field(0, ge=0, le=MAX_WAIT_MS)
    kinds: list[str] | None = None


class PullResult(WireResult):
    events: list[Event]
    pending: int


class AckParams(WireParams):
    seqs: list[int] = Field(max_length=MAX_ACK)


class AckResult(WireResult):
    acked: int


class DeadLetterParams(WireParams):
    seq: int = Field(ge=1)
    reason: str = Field(max_length=2000)


class DeadLetterResult(WireResult):
    moved: bool


class DeadListParams(WireParams):
    limit: int = Field(100, ge=1, le=MAX_PULL)


class DeadEventModel(WireModel):
    seq: int
    kind: str
    dedupe_key: str
    payload: dict[str, Any]
    created_at: float
    deliveries: int
    dead_at: float
    reason: str


class DeadListResult(WireResult):
    events: list[DeadEventModel]


class ReplayParams(WireParams):
    seqs: list[int] = Field(min_length=1, max_length=MAX_ACK)


class ReplayResult(WireResult):
    replayed: int


class PurgeDeadParams(WireParams):
    pass


class PurgeDeadResult(WireResult):
    purged: int


class DeadLetterRequest(WireRequest[DeadLetterParams, Literal["nexo/events/dead_letter"]]):
    method: Literal["nexo/events/dead_letter"] = "nexo/events/dead_letter"


class DeadListRequest(WireRequest[DeadListParams, Literal["nexo/events/dead_list"]]):
    method: Literal["nexo/events/dead_list"] = "nexo/events/dead_list"


class ReplayRequest(WireRequest[ReplayParams, Literal["nexo/events/replay"]]):
    method: Literal["nexo/events/replay"] = "nexo/events/replay"


class PurgeDeadRequest(WireRequest[PurgeDeadParams, Literal["nexo/events/purge_dead"]]):
    method: Literal["nexo/events/purge_dead"] = "nexo/events/purge_dead"


class PullRequest(WireRequest[PullParams, Literal["nexo/events/pull"]]):
    method: Literal["nexo/events/pull"] = "nexo/events/pull"


class AckRequest(WireRequest[AckParams, Literal["nexo/events/ack"]]):
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
        bindings = (
            (PULL_METHOD, PullParams, self._pull),
            (ACK_METHOD, AckParams, self._ack),
            (DEAD_LETTER_METHOD, DeadLetterParams, self._dead_letter),
            (DEAD_LIST_METHOD, DeadListParams, self._dead_list),
            (REPLAY_METHOD, ReplayParams, self._replay),
            (PURGE_DEAD_METHOD, PurgeDeadParams, self._purge_dead),
        )
        return tuple(
            MethodBinding(method, params, refusing_full_storage(handler))
            for method, params, handler in bindings
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

    async def _dead_letter(
        self, ctx: ServerRequestContext[Any, Any], params: DeadLetterParams
    ) -> DeadLetterResult:
        log = self._get_log(ctx.lifespan_context)
        return DeadLetterResult(moved=await log.dead_letter(params.seq, params.reason))

    async def _dead_list(self, ctx: ServerRequestContext[Any, Any], params: DeadListParams) -> DeadListResult:
        log = self._get_log(ctx.lifespan_context)
        dead = await log.dead(params.limit)
        return DeadListResult(events=[DeadEventModel.model_validate(e, from_attributes=True) for e in dead])

    async def _replay(self, ctx: ServerRequestContext[Any, Any], params: ReplayParams) -> ReplayResult:
        log = self._get_log(ctx.lifespan_context)
        return ReplayResult(replayed=await log.replay(params.seqs))

    async def _purge_dead(
        self, ctx: ServerRequestContext[Any, Any], params: PurgeDeadParams
    ) -> PurgeDeadResult:
        log = self._get_log(ctx.lifespan_context)
        return PurgeDeadResult(purged=await log.purge_dead())


def experimental_events_capability(kinds: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The handshake-era advertisement (extensions only appear in 2026-07-28 discovery)."""
    return {EVENTS_EXTENSION: {"kinds": list(kinds), "max_wait_ms": MAX_WAIT_MS}}
