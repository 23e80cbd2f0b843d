"""The wire contract of the audit server: ledger entries, goals, and its control-plane methods.

Every method is a custom JSON-RPC request (``nexo/audit/...``), not a tool, so none of them reaches
any model's tool list. Each entry kind has a body model; build drafts from them with
``EntryDraft.of(body, ...)``. The server validates every draft again and names what is wrong.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import AwareDatetime, ConfigDict, Field

from shared.protocol import goal_terms as _goal_terms
from shared.protocol.deferred import WireModel, WireParams, WireRequest, WireResult

AUDIT_EXTENSION = "nexo/audit"
MAX_APPEND = 500
MAX_TAIL = 1_000
MAX_SUBJECT = 500
GOAL_NOT_FOUND = _goal_terms.GOAL_NOT_FOUND
TRANSITION_REFUSED = -32049
"""JSON-RPC error code for a goal status change the lifecycle does not allow."""

EntryKind = Literal[
    "turn", "tool_call", "approval_requested", "approval_answered", "pairing", "channel", "cron_fire",
    "memory_promotion", "config_change", "goal", "notice", "checkpoint", "spend_reserved",
]  # fmt: skip
ToolOutcome = Literal["ok", "error", "cancelled", "timeout", "rate_limited", "denied"]
GoalKind = _goal_terms.GoalKind
GoalStatus = Literal[
    "running", "sleeping", "queued", "paused", "done", "failed", "cancelled", "lost_on_restart"
]
ProblemKind = Literal["hash_mismatch", "seq_gap", "prev_link_broken", "checkpoint_mismatch", "head_mismatch"]

ENTRY_KINDS: tuple[str, ...] = get_args(EntryKind)
GOAL_KINDS = _goal_terms.GOAL_KINDS
TERMINAL_STATUSES = _goal_terms.TERMINAL_STATUSES


Short = Annotated[str, Field(min_length=1, max_length=200)]
Text = Annotated[str, Field(max_length=4000)]
Digest = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Word = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept as is: one text per value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def args_digest(arguments: Mapping[str, Any]) -> str:
    """What a tool_call entry records instead of the arguments themselves."""
    return hashlib.sha256(canonical_json(dict(arguments)).encode()).hexdigest()


# -- bodies, one model per kind ----------------------------------------------------------------


class Body(WireModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TurnBody(Body):
    index: int = Field(ge=0)
    outcome: Word
    """What the turn ended with, e.g. tool_calls, answered, done, failed, budget_exhausted."""
    decision: Text = ""
    """What the model decided, or a summary of the turn."""
    tool_calls: int = Field(0, ge=0)
    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)
    """Tokens so far in the goal (cumulative over its turns)."""
    cache_read_tokens: int = Field(0, ge=0)
    cache_write_tokens: int = Field(0, ge=0)
    """Input tokens read from and written to the provider's prompt cache so far (not in input_tokens)."""
    duration_ms: float | None = Field(None, ge=0)
    model: Short | None = None
    """``provider/model`` that answered (spend budgets are rebuilt from these after a restart)."""
    unattended: bool = False
    """True for turns nobody is watching: heartbeat, proactive ticks, cron fires."""


class ToolCallBody(Body):
    tool: Short
    args_sha256: Digest
    """:func:`args_digest` of the arguments; the arguments themselves are never recorded."""
    duration_ms: float = Field(ge=0)
    outcome: ToolOutcome
    call_id: Short | None = None
    error: Text | None = None


class ApprovalRequestedBody(Body):
    request_id: Short
    tool: Short
    args_sha256: Digest
    description: Text = ""
    asked: list[Short] = Field(default_factory=list, max_length=50)
    """Where the prompt went (channel:<server>, terminal)."""


class ApprovalAnsweredBody(Body):
    request_id: Short
    behavior: Literal["allow", "deny"]
    answered_by: Short
    """channel:<server>, terminal, policy, timeout or restart."""
    waited_ms: float | None = Field(None, ge=0)
    approver: Short | None = None
    """Who answered on an operator surface (``answered_by: dashboard``): the logged-in operator."""


class PairingBody(Body):
    action: Word
    """code_issued, paired, refused, revoked, locked_out, ..."""
    channel: Short
    sender: Short
    detail: Text = ""


class ChannelBody(Body):
    """A traffic marker: never the message text."""

    direction: Literal["in", "out"]
    chat_id: Short
    status: Word
    """received, delivered, sent, queued, failed, duplicate, ..."""
    message_id: Short | None = None
    chars: int = Field(0, ge=0)


class CronFireBody(Body):
    job_id: Short
    fire_id: Short
    scheduled_for: Short
    late_s: float = Field(0.0, ge=0)
    status: Word = "fired"
    """fired, done, failed, skipped (autonomy paused or a limit), missed (downtime, overlap, parked)."""
    detail: Text = ""
    slots: int = Field(1, ge=1)
    """How many slots the row stands for: one ``missed`` row covers every slot of the entry that one
    sweep of the cron server found missed (the cron server keeps a fire row per slot)."""


class MemoryPromotionBody(Body):
    memory_id: Short
    tier: Word
    reason: Text = ""


class ConfigChangeBody(Body):
    path: Short
    """The key path that changed; values are never recorded (they may be secrets)."""
    change: Literal["set", "unset", "reload"]
    detail: Text = ""


class SpendReservedBody(Body):
    """Written and stored before an unattended model call: the goal's tokens so far plus a bound on
    that call. A crash before the call's ``turn`` entry leaves this bound as the goal's spend."""

    index: int = Field(ge=0)
    """The turn the call belongs to."""
    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)
    model: Short


class NoticeBody(Body):
    level: Literal["info", "warning", "error"]
    message: Text
    limit: Short | None = None
    """The limit that was hit, when the notice reports one (every limit is audited)."""


KIND_BODIES: dict[str, type[Body]] = {
    # goal and checkpoint entries are written by the server itself (their bodies live there).
    "turn": TurnBody,
    "tool_call": ToolCallBody,
    "approval_requested": ApprovalRequestedBody,
    "approval_answered": ApprovalAnsweredBody,
    "pairing": PairingBody,
    "channel": ChannelBody,
    "cron_fire": CronFireBody,
    "memory_promotion": MemoryPromotionBody,
    "config_change": ConfigChangeBody,
    "notice": NoticeBody,
    "spend_reserved": SpendReservedBody,
}
BODY_KINDS: dict[type[Body], str] = {model: kind for kind, model in KIND_BODIES.items()}


# -- entries -------------------------------------------------------------------------------------


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


# -- goals ---------------------------------------------------------------------------------------


class Origin(WireModel):
    source: str
    """channel:<server> for a chat, or cli, cron, heartbeat."""
    session_key: str | None = None
    chat_id: str | None = None


class Budget(WireModel):
    turns: int = Field(0, ge=0)
    tokens: int = Field(0, ge=0)
    cost_usd: float = Field(0.0, ge=0)
    wall_s: float = Field(0.0, ge=0)


class Goal(WireModel):
    id: str
    agent: str
    kind: GoalKind
    status: GoalStatus
    origin: Origin
    prompt: str
    """The first line of the prompt, capped."""
    phase: str
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    last_decision: str
    last_event: str
    budget: Budget
    outcome: str
    notified: bool
    """Set once the origin was told that the goal was lost on a restart."""


# -- control-plane params and results ------------------------------------------------------------


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
