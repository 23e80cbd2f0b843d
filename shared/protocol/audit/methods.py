"""The audit server's control-plane requests (``nexo/audit/...``), their params and results."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, Field

from shared.protocol.audit.entries import Appended, Entry, EntryDraft, Head, VerifyReport
from shared.protocol.audit.goals import Budget, Goal, Origin
from shared.protocol.audit.terms import MAX_APPEND, MAX_TAIL, EntryKind, GoalKind, GoalStatus
from shared.protocol.deferred import WireParams, WireRequest, WireResult


class AppendParams(WireParams):
    entries: list[EntryDraft] = Field(min_length=1, max_length=MAX_APPEND)


class AppendResult(WireResult):
    entries: list[Appended]


class VerifyParams(WireParams):
    expected_head: Head | None = None


class VerifyResult(WireResult):
    report: VerifyReport


class HeadParams(WireParams):
    pass


class HeadResult(WireResult):
    head: Head


class TailParams(WireParams):
    goal_id: str | None = None
    source: str | None = None
    kind: EntryKind | None = None
    since_seq: int | None = Field(None, ge=0)
    """Entries after this seq, oldest first (to follow the ledger); None: the newest ``limit``."""
    since_at: AwareDatetime | None = None
    """Entries written at or after this time, oldest first (page on with ``since_seq``)."""
    kinds: list[EntryKind] | None = Field(None, min_length=1)
    """Only entries of these kinds (``kind`` narrows further when both are given)."""
    limit: int = Field(50, ge=1, le=MAX_TAIL)


class TailResult(WireResult):
    entries: list[Entry]


class TrimParams(WireParams):
    turns_per_goal: int | None = Field(None, ge=1)
    max_age_s: float | None = Field(None, gt=0)
    """Overrides of the server's settings for this trim only."""


class TrimResult(WireResult):
    removed: int
    checkpoint: Entry | None = None


class GoalCreateParams(WireParams):
    id: str | None = None
    """Chosen by the caller to make retries idempotent; generated when absent."""
    agent: str
    kind: GoalKind
    origin: Origin
    prompt: str
    phase: str = ""
    source: str = "orchestrator"


class GoalCreateResult(WireResult):
    goal: Goal
    created: bool


class GoalUpdateParams(WireParams):
    id: str
    status: GoalStatus | None = None
    phase: str | None = None
    last_decision: str | None = None
    last_event: str | None = None
    budget: Budget | None = None
    """Totals so far (not increments), so a retried update changes nothing."""
    outcome: str | None = None
    reason: str = ""
    source: str = "orchestrator"


class GoalUpdateResult(WireResult):
    goal: Goal
    promoted: list[Goal]
    """Queued goals that took the freed slots: the caller starts them."""


class GoalGetParams(WireParams):
    id: str


class GoalGetResult(WireResult):
    goal: Goal


class GoalListParams(WireParams):
    active_only: bool = True
    kind: GoalKind | None = None
    agent: str | None = None
    limit: int = Field(200, ge=1, le=1_000)


class GoalListResult(WireResult):
    goals: list[Goal]
    running: int
    max_running: int


class GoalBootParams(WireParams):
    resumable_kinds: list[GoalKind] = Field(default_factory=list)


class GoalBootResult(WireResult):
    lost: list[Goal]
    """Lost goals whose origin has not been told yet (this boot's and earlier ones')."""
    resumable: list[Goal]
    promoted: list[Goal]


class GoalMarkNotifiedParams(WireParams):
    ids: list[str] = Field(min_length=1, max_length=1_000)


class GoalMarkNotifiedResult(WireResult):
    marked: int


class AppendRequest(WireRequest[AppendParams, Literal["nexo/audit/append"]]):
    method: Literal["nexo/audit/append"] = "nexo/audit/append"


class VerifyRequest(WireRequest[VerifyParams, Literal["nexo/audit/verify"]]):
    method: Literal["nexo/audit/verify"] = "nexo/audit/verify"


class HeadRequest(WireRequest[HeadParams, Literal["nexo/audit/head"]]):
    method: Literal["nexo/audit/head"] = "nexo/audit/head"


class TailRequest(WireRequest[TailParams, Literal["nexo/audit/tail"]]):
    method: Literal["nexo/audit/tail"] = "nexo/audit/tail"


class TrimRequest(WireRequest[TrimParams, Literal["nexo/audit/trim"]]):
    method: Literal["nexo/audit/trim"] = "nexo/audit/trim"


class GoalCreateRequest(WireRequest[GoalCreateParams, Literal["nexo/audit/goals/create"]]):
    method: Literal["nexo/audit/goals/create"] = "nexo/audit/goals/create"


class GoalUpdateRequest(WireRequest[GoalUpdateParams, Literal["nexo/audit/goals/update"]]):
    method: Literal["nexo/audit/goals/update"] = "nexo/audit/goals/update"


class GoalGetRequest(WireRequest[GoalGetParams, Literal["nexo/audit/goals/get"]]):
    method: Literal["nexo/audit/goals/get"] = "nexo/audit/goals/get"


class GoalListRequest(WireRequest[GoalListParams, Literal["nexo/audit/goals/list"]]):
    method: Literal["nexo/audit/goals/list"] = "nexo/audit/goals/list"


class GoalBootRequest(WireRequest[GoalBootParams, Literal["nexo/audit/goals/boot"]]):
    method: Literal["nexo/audit/goals/boot"] = "nexo/audit/goals/boot"


class GoalMarkNotifiedRequest(WireRequest[GoalMarkNotifiedParams, Literal["nexo/audit/goals/mark_notified"]]):
    method: Literal["nexo/audit/goals/mark_notified"] = "nexo/audit/goals/mark_notified"
