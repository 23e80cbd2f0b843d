"""The body of each kind of ledger entry, one model per kind."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from shared.protocol.audit.terms import ToolOutcome
from shared.protocol.deferred import WireModel

Short = Annotated[str, Field(min_length=1, max_length=200)]
Text = Annotated[str, Field(max_length=4000)]
Digest = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Word = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]


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
