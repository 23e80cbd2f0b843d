"""The wire contract of the pairing server: who may reach the model from each (channel, account).

Every method is a custom JSON-RPC request (``nexo/pairing/...``) served through the ``nexo/pairing``
extension, so none of them ever appears in a model's tool list. The orchestrator calls ``check`` for
each inbound message; the operator's CLI calls the others. Send them with
``client.session.send_request(Request(params=...), Result)``; top-level params travel in camelCase
(``pendingId``, ``chatId``), the SDK's convention, which the models take care of.

Identity matching is exact after :func:`shared.protocol.identities.normalize_sender`; display
names are never used for matching.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import ConfigDict, Field

from shared.protocol import pairing_methods as _methods
from shared.protocol.deferred import WireModel, WireParams, WireRequest, WireResult
from shared.protocol.pairing_terms import DmPolicy as DmPolicy
from shared.protocol.pairing_terms import Role as Role
from shared.protocol.pairing_terms import Scope as Scope
from shared.protocol.pairing_terms import Verdict as Verdict

PAIRING_EXTENSION = _methods.PAIRING_EXTENSION
CHECK_METHOD = _methods.CHECK_METHOD
APPROVE_METHOD = _methods.APPROVE_METHOD
DENY_METHOD = _methods.DENY_METHOD
REVOKE_METHOD = _methods.REVOKE_METHOD
SEED_METHOD = _methods.SEED_METHOD
LIST_METHOD = _methods.LIST_METHOD

CODE_INVALID = -32060
"""JSON-RPC error code: the approval code is malformed, wrong, expired, used or denied."""
LOCKED_OUT = -32061
"""JSON-RPC error code: too many failed approvals; every approval is refused until the lockout ends."""
PENDING_NOT_FOUND = -32064
"""JSON-RPC error code: no open pending request has this id."""

MAX_SEED = 1_000

GroupPolicy = Literal["allowlist", "open", "disabled"]
PendingStatus = Literal["pending", "approved", "denied", "expired"]
Via = Literal["approve", "seed"]
Reason = Literal[
    "allow_from",  # allow: the sender is one of the operator's configured owner ids
    "paired",  # allow: a paired direct-message sender
    "paired_group",  # allow: a paired group chat (group policy allowlist)
    "open_policy",  # allow: the policy admits anyone
    "code_issued",  # challenge: a new code was issued to this sender
    "code_resent",  # challenge: the sender's pending code is sent again
    "reply_cap",  # challenge: the sender already got every reply allowed; send nothing
    "unknown_sender",  # drop: dm policy allowlist and the sender is not paired
    "pending_full",  # drop: too many pending requests on this (channel, account)
    "code_rate",  # drop: this sender got a code too recently
    "dm_disabled",  # drop: dm policy disabled
    "group_disabled",  # drop: group policy disabled
    "group_not_allowed",  # drop: group policy allowlist and the group chat is not paired
    "mention_required",  # drop: a group message that does not mention the agent
    "invalid_sender",  # drop: the sender id is not a valid id on its platform
    "invalid_chat",  # drop: the group chat id is not a valid id on its platform
    "storage_error",  # drop: the database failed; the gate fails closed
]
REASONS: tuple[str, ...] = get_args(Reason)

Name = Annotated[str, Field(min_length=1, max_length=128)]
RawId = Annotated[str, Field(max_length=4096)]
"""A platform id as received; ``identities.normalize_sender`` decides whether it is valid."""


# -- records -------------------------------------------------------------------------------------


class Policy(WireModel):
    """The operator's gate settings for one (channel, account)."""

    model_config = ConfigDict(extra="forbid")

    dm: DmPolicy = "pairing"
    group: GroupPolicy = "disabled"
    require_mention: bool = True
    """In groups, only messages that mention the agent pass."""


class PairedRecord(WireModel):
    channel: str
    account: str
    scope: Scope
    sender: str
    """The normalised sender id (dm) or group chat id (group)."""
    role: Role
    paired_at: str
    """UTC time, ISO 8601 with microseconds; the last time it was (re)paired."""
    via: Via
    by: str
    """Who approved or seeded it, e.g. cli or channel:console."""
    revoked_at: str | None = None


class PendingRequest(WireModel):
    """A sender waiting for the operator's approval. The code itself is never part of it."""

    pending_id: str
    channel: str
    account: str
    sender: str
    display_name: str | None = None
    """As the platform reported it: for showing to the operator only, never for matching."""
    created_at: str
    expires_at: str
    replies: int
    """Challenge replies sent to the sender so far."""
    status: PendingStatus = "pending"


class Lockout(WireModel):
    until: str | None = None
    """When approvals are accepted again; None when they are not locked."""
    failures: int
    """Failed approvals counted in the current window."""


# -- control-plane params and results ------------------------------------------------------------


class CheckParams(WireParams):
    channel: Name
    account: Name = "default"
    platform: Name = "generic"
    sender: RawId
    """The platform's id of the sender, as received."""
    display_name: str | None = Field(None, max_length=4096)
    scope: Scope = "dm"
    chat_id: RawId | None = None
    """The group's chat id (required for scope group)."""
    mentioned: bool = False
    policy: Policy = Field(default_factory=Policy)
    allow_from: list[RawId] = Field(default_factory=list, max_length=MAX_SEED)
    """Owner ids from the operator's config, matched after the same normalisation."""


class CheckResult(WireResult):
    verdict: Verdict
    role: Role | None = None
    """Set when the verdict is allow."""
    reason: Reason
    reply: str | None = None
    """Text to send back to the sender (a challenge under the reply cap); send nothing when None."""
    code: str | None = None
    """The code in ``reply``, for the operator's notification."""
    pending_id: str | None = None
    new_pending: bool = False
    """True only for the call that created the pending request: notify the operator once."""


class ApproveParams(WireParams):
    code: str | None = Field(None, max_length=64)
    """The code as the sender passed it on (any case; spaces and dashes are ignored)."""
    pending_id: str | None = Field(None, max_length=128)
    """Instead of ``code``: the request's id from ``list`` (give exactly one of the two)."""
    by: Name
    """Who approves, e.g. cli or channel:console."""
    role: Role = "contact"


class ApproveResult(WireResult):
    record: PairedRecord
    request: PendingRequest
    """The pending request this approval closed (status approved)."""


class DenyParams(WireParams):
    pending_id: str = Field(min_length=1, max_length=128)
    by: Name = "cli"


class DenyResult(WireResult):
    changed: bool
    """False when the request was already approved, denied or expired."""
    status: PendingStatus


class RevokeParams(WireParams):
    channel: Name
    sender: RawId
    account: Name | None = None
    """None revokes the sender on every account of the channel."""
    scope: Scope = "dm"
    platform: Name = "generic"


class RevokeResult(WireResult):
    revoked: int


class SeedParams(WireParams):
    channel: Name
    account: Name = "default"
    platform: Name = "generic"
    senders: list[RawId] = Field(min_length=1, max_length=MAX_SEED)
    """Sender ids (scope dm) or group chat ids (scope group)."""
    role: Role = "contact"
    scope: Scope = "dm"
    by: Name


class SeedResult(WireResult):
    records: list[PairedRecord]
    changed: int
    """Records created, re-activated or given a new role; the rest were already paired as asked."""


class ListParams(WireParams):
    channel: Name | None = None
    include_revoked: bool = False


class ListResult(WireResult):
    records: list[PairedRecord]
    pending: list[PendingRequest]
    """Open requests (unexpired, neither approved nor denied), oldest first."""
    lockout: Lockout


class CheckRequest(WireRequest[CheckParams, Literal["nexo/pairing/check"]]):
    method: Literal["nexo/pairing/check"] = "nexo/pairing/check"


class ApproveRequest(WireRequest[ApproveParams, Literal["nexo/pairing/approve"]]):
    method: Literal["nexo/pairing/approve"] = "nexo/pairing/approve"


class DenyRequest(WireRequest[DenyParams, Literal["nexo/pairing/deny"]]):
    method: Literal["nexo/pairing/deny"] = "nexo/pairing/deny"


class RevokeRequest(WireRequest[RevokeParams, Literal["nexo/pairing/revoke"]]):
    method: Literal["nexo/pairing/revoke"] = "nexo/pairing/revoke"


class SeedRequest(WireRequest[SeedParams, Literal["nexo/pairing/seed"]]):
    method: Literal["nexo/pairing/seed"] = "nexo/pairing/seed"


class ListRequest(WireRequest[ListParams, Literal["nexo/pairing/list"]]):
    method: Literal["nexo/pairing/list"] = "nexo/pairing/list"
