"""The wire contract of the cron server: tool ``_meta`` keys, fire events and control methods.

Model-facing tools (``cron_create``, ``cron_list``, ``reminder``, ...) never take the binding, the
agent or the model as arguments: the orchestrator puts them in the ``_meta`` of each ``tools/call``
under :data:`BINDING_META_KEY`, :data:`AGENT_META_KEY` and :data:`MODEL_META_KEY` (see
:func:`tool_meta`). A client that sends none works on the ``default`` binding and agent.

A fire reaches the orchestrator as a durable event of the server's event log
(``shared.protocol.events``: pull, then ack): kind :data:`FIRE_EVENT` with a :class:`FirePayload`,
and every slot that did not fire is reported by a :data:`MISSED_EVENT` with a :class:`MissedPayload`.
The orchestrator reports how a fire ended with ``nexo/cron/fire_result``. Every other operator call is
a custom JSON-RPC request under ``nexo/cron/``, so none of them reaches any model's tool list.
Wire models only: no I/O.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast, get_args

import mcp_types as types
from pydantic import Field

from shared.protocol.deferred import WireModel, WireParams, WireRequest, WireResult
from shared.protocol.memory.meta import AGENT_META_KEY, AGENT_PATTERN

CRON_EXTENSION = "nexo/cron"
BINDING_META_KEY = "nexo/binding"
MODEL_META_KEY = "nexo/model"
"""``provider/model`` the entry's turns run with; pinned when the entry is created."""
DEFAULT_BINDING = "default"
DEFAULT_AGENT = "default"
BINDING_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
"""Bindings as the orchestrator's config names them (no ``:``, poller ids are built from them)."""
POLLER_NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
MODEL_PATTERN = r"^[^/\s]+/\S+$"

FIRE_EVENT = "cron_fire"
MISSED_EVENT = "cron_missed"
EVENT_KINDS: tuple[str, ...] = (FIRE_EVENT, MISSED_EVENT)
MAX_LISTED_SLOTS = 100
"""A missed event lists at most this many slots (the newest); ``count`` has them all."""
MAX_FIRES = 1_000
MAX_POLLERS = 200
MAX_TEXT = 8_000

ENTRY_NOT_FOUND = -32054
"""JSON-RPC error code (implementation-defined range) for an unknown entry id."""
FIRE_NOT_FOUND = -32055
"""JSON-RPC error code for an unknown fire id."""
STATE_REFUSED = -32059
"""JSON-RPC error code for a change the entry's state does not allow (e.g. pausing a finished one)."""

EntryKind = Literal["prompt", "reminder", "agent_turn"]
"""prompt: a model turn with the prompt; reminder: send the text as is; agent_turn: a config poller."""
EntryState = Literal["active", "paused", "parked", "done", "failed", "expired"]
ScheduleKind = Literal["cron", "interval", "once"]
MisfirePolicy = Literal["park", "skip", "catch_up_once", "all"]
Overlap = Literal["skip", "allow"]
FireStatus = Literal[
    "pending", "delivered", "done", "failed", "skipped", "missed", "skipped_overlap", "retrying"
]
FireOutcome = Literal["done", "failed", "skipped"]
FireReason = Literal["schedule", "catch_up", "manual", "resumed", "downtime", "parked", "overlap"]
"""Why a fire row exists: the first four fired, the last three record a slot that did not fire."""
MissedReason = Literal["downtime", "overlap", "parked"]

ENTRY_STATES: tuple[str, ...] = get_args(EntryState)
MISFIRE_POLICIES: tuple[str, ...] = get_args(MisfirePolicy)
FIRE_STATUSES: tuple[str, ...] = get_args(FireStatus)
FINISHED_STATES: frozenset[str] = frozenset({"done", "failed", "expired"})
OPEN_FIRE_STATUSES: tuple[str, ...] = ("pending", "delivered", "retrying")
"""A fire in one of these has not ended: with overlap ``skip`` the entry's next slot is skipped."""

Binding = Annotated[str, Field(pattern=BINDING_PATTERN)]
AgentId = Annotated[str, Field(pattern=AGENT_PATTERN)]
EntryId = Annotated[str, Field(min_length=1, max_length=200)]


def tool_meta(
    binding: str = DEFAULT_BINDING, agent: str = DEFAULT_AGENT, model: str | None = None
) -> types.RequestParamsMeta:
    """The ``_meta`` the orchestrator sends with every cron tool call."""
    meta: dict[str, Any] = {BINDING_META_KEY: binding, AGENT_META_KEY: agent}
    if model is not None:
        meta[MODEL_META_KEY] = model
    # RequestParamsMeta is an open TypedDict (PEP 728 extra_items) that mypy does not model yet.
    return cast(types.RequestParamsMeta, meta)


# -- records -------------------------------------------------------------------------------------


class Entry(WireModel):
    """One schedule entry as the operator sees it. Times are ISO 8601 in UTC unless named local."""

    id: str
    binding: str
    agent: str
    kind: EntryKind
    schedule: str
    """Canonical schedule text: ``cron 0 9 * * mon-fri``, ``every 30m``, ``once_at 2026-12-01T09:00:00Z``."""
    schedule_kind: ScheduleKind
    timezone: str
    recurring: bool
    text: str
    """The prompt (prompt, agent_turn) or the message to send (reminder)."""
    channel: str | None = None
    recipient: str | None = None
    provider: str | None = None
    model: str | None = None
    misfire: MisfirePolicy
    grace_s: float
    overlap: Overlap
    permanent: bool
    """Owned by the configuration (pollers): exempt from parking and from the maximum age."""
    state: EntryState
    next_slot: str | None = None
    """The next scheduled slot; None once a one-shot has fired or the schedule has no more slots."""
    next_due: str | None = None
    """When that slot fires: the slot moved by the entry's jitter."""
    next_due_local: str | None = None
    """``next_due`` in the entry's timezone."""
    created_at: str
    finished_at: str | None = None
    last_fire: FireStatus | None = None
    """Status of the entry's newest fire row."""


class Fire(WireModel):
    """One row per (entry, slot): a fire, or a slot recorded as missed or skipped."""

    id: int
    entry_id: str
    slot: str
    due_at: str
    status: FireStatus
    attempt: int
    """1 for the first delivery; each retry of a failed one-shot adds one."""
    manual: bool
    reason: FireReason
    error: str | None = None
    created_at: str
    finished_at: str | None = None
    retry_at: str | None = None
    """When a ``retrying`` fire is delivered again."""


class FirePayload(WireModel):
    """The payload of a ``cron_fire`` event: everything needed to run the fire."""

    fire_id: int
    entry_id: str
    kind: EntryKind
    binding: str
    agent: str
    provider: str | None = None
    model: str | None = None
    text: str
    """prompt and agent_turn: the prompt of a model turn; reminder: the message to send as is."""
    channel: str | None = None
    recipient: str | None = None
    schedule: str
    timezone: str
    slot: str
    due_at: str
    attempt: int
    manual: bool
    reason: FireReason


class MissedPayload(WireModel):
    """The payload of a ``cron_missed`` event: slots of one entry that did not fire."""

    entry_id: str
    binding: str
    agent: str
    kind: EntryKind
    reason: MissedReason
    slots: list[str]
    """The newest of them, at most :data:`MAX_LISTED_SLOTS`, oldest first."""
    count: int
    """How many slots did not fire, also those not listed (and those past the per-sweep row cap)."""
    parked: bool = False
    """True when the entry was parked: it waits for a resume."""


class PollerSpec(WireModel):
    """A config-owned poller: an ``agent_turn`` entry with id ``poller:<binding>:<name>``."""

    name: str = Field(pattern=POLLER_NAME_PATTERN)
    schedule: str = Field(min_length=1, max_length=200)
    timezone: str = "UTC"
    prompt: str = Field(min_length=1, max_length=MAX_TEXT)
    channel: str | None = None
    recipient: str | None = None
    misfire: MisfirePolicy | None = None
    """Default for pollers: skip."""


# -- control-plane params and results ------------------------------------------------------------


class ListParams(WireParams):
    binding: Binding | None = None
    include_finished: bool = False


class ListResult(WireResult):
    entries: list[Entry]
    """Oldest first."""


class EntryIdParams(WireParams):
    id: EntryId


class EntryResult(WireResult):
    entry: Entry


class DropResult(WireResult):
    id: str
    dropped: bool


class FireParams(WireParams):
    id: EntryId


class FireResult(WireResult):
    fire: Fire


class FireOutcomeParams(WireParams):
    fire_id: int = Field(ge=1)
    outcome: FireOutcome
    error: str | None = Field(None, max_length=2_000)
    attempt: int | None = Field(None, ge=1)
    """The attempt this outcome is for (from the event); a stale one changes nothing."""


class FireOutcomeResult(WireResult):
    fire: Fire
    entry: Entry


class FiresParams(WireParams):
    entry_id: EntryId | None = None
    since: str | None = None
    """ISO 8601: only rows created at or after it."""
    limit: int = Field(100, ge=1, le=MAX_FIRES)


class FiresResult(WireResult):
    fires: list[Fire]
    """Newest first."""


class ConfigureParams(WireParams):
    jitter: dict[str, Any] = Field(default_factory=dict)
    """Jitter knobs to change (enabled, recurring_frac, recurring_cap_ms, one_shot_max_ms,
    one_shot_floor_ms, one_shot_minute_mod, recurring_max_age_ms); unnamed ones keep their value."""


class ConfigureResult(WireResult):
    jitter: dict[str, Any]
    """Every knob as it now applies."""
    rescheduled: int
    """Active entries whose next due time was computed again."""


class SyncPollersParams(WireParams):
    binding: Binding
    agent: AgentId
    pollers: list[PollerSpec] = Field(max_length=MAX_POLLERS)
    dry_run: bool = False
    """Only check the pollers (``refused`` says which would be), change nothing."""


class SyncPollersResult(WireResult):
    created: list[str]
    updated: list[str]
    unchanged: list[str]
    deleted: list[str]
    refused: dict[str, str] = Field(default_factory=dict)
    """Poller name -> why it was not taken (its schedule); the binding's other pollers are synced."""


class ListRequest(WireRequest[ListParams, Literal["nexo/cron/list"]]):
    method: Literal["nexo/cron/list"] = "nexo/cron/list"


class PauseRequest(WireRequest[EntryIdParams, Literal["nexo/cron/pause"]]):
    method: Literal["nexo/cron/pause"] = "nexo/cron/pause"


class ResumeRequest(WireRequest[EntryIdParams, Literal["nexo/cron/resume"]]):
    method: Literal["nexo/cron/resume"] = "nexo/cron/resume"


class DropRequest(WireRequest[EntryIdParams, Literal["nexo/cron/drop"]]):
    method: Literal["nexo/cron/drop"] = "nexo/cron/drop"


class FireRequest(WireRequest[FireParams, Literal["nexo/cron/fire"]]):
    method: Literal["nexo/cron/fire"] = "nexo/cron/fire"


class FireOutcomeRequest(WireRequest[FireOutcomeParams, Literal["nexo/cron/fire_result"]]):
    method: Literal["nexo/cron/fire_result"] = "nexo/cron/fire_result"


class FiresRequest(WireRequest[FiresParams, Literal["nexo/cron/fires"]]):
    method: Literal["nexo/cron/fires"] = "nexo/cron/fires"


class ConfigureRequest(WireRequest[ConfigureParams, Literal["nexo/cron/configure"]]):
    method: Literal["nexo/cron/configure"] = "nexo/cron/configure"


class SyncPollersRequest(WireRequest[SyncPollersParams, Literal["nexo/cron/sync_pollers"]]):
    method: Literal["nexo/cron/sync_pollers"] = "nexo/cron/sync_pollers"


def poller_id(binding: str, name: str) -> str:
    return f"poller:{binding}:{name}"
