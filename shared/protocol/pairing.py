"""The wire contract of the pairing server: who may reach the model from each (channel, account).

Every method is a custom JSON-RPC request (``nexo/pairing/...``) served through the ``nexo/pairing``
extension, so none of them ever appears in a model's tool list. The orchestrator calls ``check`` for
each inbound message; the operator's CLI calls the others. Send them with
``client.session.send_request(Request(params=...), Result)``; top-level params travel in camelCase
(``pendingId``, ``chatId``), the SDK's convention, which the models take care of.

Identity matching is exact after :func:`normalize_sender`, which is ASCII-only on purpose: Unicode
folding (NFKC and the like) would make a fullwidth or look-alike id equal to an allowed one, so any
character outside printable ASCII is refused instead. Display names are never used for matching.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Literal, get_args

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field

PAIRING_EXTENSION = "nexo/pairing"

CHECK_METHOD = "nexo/pairing/check"
APPROVE_METHOD = "nexo/pairing/approve"
DENY_METHOD = "nexo/pairing/deny"
REVOKE_METHOD = "nexo/pairing/revoke"
SEED_METHOD = "nexo/pairing/seed"
LIST_METHOD = "nexo/pairing/list"

CODE_INVALID = -32060
"""JSON-RPC error code: the approval code is malformed, wrong, expired, used or denied."""
LOCKED_OUT = -32061
"""JSON-RPC error code: too many failed approvals; every approval is refused until the lockout ends."""
PENDING_NOT_FOUND = -32064
"""JSON-RPC error code: no open pending request has this id."""

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
"""Upper-case letters and digits without the look-alikes I, O, 0 and 1."""
CODE_LENGTH = 8
MAX_ID_LENGTH = 256
MAX_SEED = 1_000

Verdict = Literal["allow", "challenge", "drop"]
Role = Literal["owner", "contact"]
Scope = Literal["dm", "group"]
DmPolicy = Literal["pairing", "allowlist", "open", "disabled"]
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
"""A platform id as received; :func:`normalize_sender` decides whether it is valid."""


# -- identities ----------------------------------------------------------------------------------


class InvalidSender(ValueError):
    """A platform id that cannot be matched safely; the message names the problem and the fix."""


class InvalidCode(ValueError):
    """An approval code that is not CODE_LENGTH characters of CODE_ALPHABET."""


_GENERIC = re.compile(r"[A-Za-z0-9._:@+-]{1,256}")
_TELEGRAM = re.compile(r"-?[1-9][0-9]{0,19}")
_SLACK_USER = re.compile(r"[UTW][A-Z0-9]{2,}")
_SLACK_CHAT = re.compile(r"[CDG][A-Z0-9]{2,}")
_DISCORD = re.compile(r"[0-9]{15,22}")
_PHONE = re.compile(r"[0-9]{6,15}")
_WHATSAPP_GROUP = re.compile(r"[0-9]{6,32}(-[0-9]{6,16})?@g\.us")
_EMAIL_LOCAL = re.compile(r"[a-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}")
_EMAIL_DOMAIN = re.compile(r"([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_WHATSAPP_USER_SUFFIXES = ("@s.whatsapp.net", "@c.us")
_ASCII_WHITESPACE = " \t\r\n\f\v"


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= 60 else raw[:57] + "...")


def _ascii_id(raw: str, what: str) -> str:
    text = raw.strip(_ASCII_WHITESPACE)
    if not text:
        raise InvalidSender(f"{what} is empty: pass the platform's id of the {what.split()[0]}")
    if text != raw:
        # "owner1 " is not the owner: a platform that sends padding sends another id, so it is refused
        # instead of being trimmed into a match.
        raise InvalidSender(
            f"{what} {_shown(raw)} has leading or trailing whitespace: ids are matched exactly, so "
            f"pass {_shown(text)} without the surrounding spaces (check the channel server or the "
            "config entry that produced it)"
        )
    if len(text) > MAX_ID_LENGTH:
        raise InvalidSender(f"{what} {_shown(text)} is {len(text)} characters long; ids have at most 256")
    for index, char in enumerate(text):
        if not " " <= char <= "~":
            name = unicodedata.name(char, "a control character")
            raise InvalidSender(
                f"{what} {_shown(text)} contains U+{ord(char):04X} ({name}) at position {index}: ids "
                "must be printable ASCII, so look-alike, fullwidth and invisible characters are refused; "
                "use the platform's own id exactly as the platform sends it"
            )
    return text


def _telegram(text: str, what: str) -> str:
    if text.startswith("@"):
        raise InvalidSender(
            f"{what} {_shown(text)} is a Telegram username: usernames change and can be taken over by "
            "someone else, so pairing uses the numeric id (e.g. 123456789); find it in the message's "
            "from.id"
        )
    if not _TELEGRAM.fullmatch(text):
        raise InvalidSender(
            f"{what} {_shown(text)} is not a Telegram id: use the numeric id (digits, a leading '-' for "
            "groups, no leading zeros), e.g. 123456789 or -1001234567890"
        )
    return text


def _slack(text: str, what: str, *, chat: bool) -> str:
    upper = text.upper()
    if _SLACK_USER.fullmatch(upper) or (chat and _SLACK_CHAT.fullmatch(upper)):
        return upper
    expected = "a conversation id (C..., G..., D...) or a user id" if chat else "a user id"
    raise InvalidSender(
        f"{what} {_shown(text)} is not a Slack id: use {expected} (U..., W... or T... followed by "
        "letters and digits), e.g. U024BE7LH; display names and @handles are not ids"
    )


def _whatsapp(text: str, what: str) -> str:
    lowered = text.lower()
    if lowered.endswith("@g.us"):
        if _WHATSAPP_GROUP.fullmatch(lowered):
            return lowered
        raise InvalidSender(
            f"{what} {_shown(text)} is not a WhatsApp group JID: expected digits followed by @g.us, "
            "e.g. 120363012345678901@g.us"
        )
    for suffix in _WHATSAPP_USER_SUFFIXES:
        if lowered.endswith(suffix):
            text = text[: -len(suffix)]
            break
    number = text[1:] if text.startswith("+") else text
    digits = re.sub(r"[ ()-]", "", number)
    if not _PHONE.fullmatch(digits):
        raise InvalidSender(
            f"{what} {_shown(text)} is not a WhatsApp number: use the E.164 number (6-15 digits, an "
            "optional leading '+', spaces and dashes allowed), e.g. +15551234567 or "
            "15551234567@s.whatsapp.net"
        )
    return digits


def _email(text: str, what: str) -> str:
    lowered = text.lower()
    local, at, domain = lowered.partition("@")
    if (
        not at
        or "@" in domain
        or not _EMAIL_LOCAL.fullmatch(local)
        or local.startswith(".")
        or local.endswith(".")
        or ".." in local
        or not _EMAIL_DOMAIN.fullmatch(domain)
    ):
        raise InvalidSender(
            f"{what} {_shown(text)} is not an email address: use the bare address with exactly one '@' "
            "and a dotted domain, e.g. alice@example.org (no display name, no angle brackets)"
        )
    return lowered


def _discord(text: str, what: str) -> str:
    if not _DISCORD.fullmatch(text):
        raise InvalidSender(
            f"{what} {_shown(text)} is not a Discord id: use the numeric snowflake (15-22 digits), "
            "e.g. 80351110224678912, not a username or a <@mention>"
        )
    return text


def _generic(text: str, what: str) -> str:
    if not _GENERIC.fullmatch(text):
        raise InvalidSender(
            f"{what} {_shown(text)} has characters ids may not contain: use letters, digits and "
            "._:@+- only (no spaces)"
        )
    return text


def _normalize(platform: str, raw: str, *, chat: bool) -> str:
    what = "chat id" if chat else "sender id"
    kind = platform.strip(_ASCII_WHITESPACE).lower()
    canonical = _canonical(kind, _ascii_id(raw, what), what, chat=chat)
    # Pairing stores the canonical form and the gate compares canonical forms: an id whose canonical
    # form would canonicalise to something else again could match two different stored ids.
    if _canonical(kind, canonical, what, chat=chat) != canonical:
        raise InvalidSender(
            f"{what} {_shown(raw)} does not keep one spelling ({_shown(canonical)} would change again); "
            "use the platform's own id exactly as the platform sends it"
        )
    return canonical


def _canonical(kind: str, text: str, what: str, *, chat: bool) -> str:
    if kind == "telegram":
        return _telegram(text, what)
    if kind == "slack":
        return _slack(text, what, chat=chat)
    if kind == "whatsapp":
        return _whatsapp(text, what)
    if kind == "email":
        return _email(text, what)
    if kind == "discord":
        return _discord(text, what)
    return _generic(text, what)


def normalize_sender(platform: str, raw: str) -> str:
    """The one spelling of a sender id on ``platform``; raises InvalidSender naming the problem.

    Platforms: telegram, slack, whatsapp, email, discord; any other name (generic, console, webhook,
    ...) keeps the id case-sensitive and allows ``[A-Za-z0-9._:@+-]``.
    """
    return _normalize(platform, raw, chat=False)


def normalize_chat(platform: str, raw: str) -> str:
    """The one spelling of a group chat id: the sender rules, plus Slack conversation ids (C, G, D)."""
    return _normalize(platform, raw, chat=True)


def normalize_code(raw: str) -> str:
    """An approval code as typed (any case, spaces and dashes) in its stored form; raises InvalidCode."""
    code = re.sub(r"[\s-]", "", raw).upper()
    if len(code) != CODE_LENGTH or any(char not in CODE_ALPHABET for char in code):
        raise InvalidCode(
            f"{_shown(raw)} is not a pairing code: codes are {CODE_LENGTH} characters from "
            f"{CODE_ALPHABET} (no I, O, 0 or 1), e.g. 7KQ2-MXHD; copy it from the sender's message"
        )
    return code


# -- records -------------------------------------------------------------------------------------


class Policy(BaseModel):
    """The operator's gate settings for one (channel, account)."""

    model_config = ConfigDict(extra="forbid")

    dm: DmPolicy = "pairing"
    group: GroupPolicy = "disabled"
    require_mention: bool = True
    """In groups, only messages that mention the agent pass."""


class PairedRecord(BaseModel):
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


class PendingRequest(BaseModel):
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


class Lockout(BaseModel):
    until: str | None = None
    """When approvals are accepted again; None when they are not locked."""
    failures: int
    """Failed approvals counted in the current window."""


# -- control-plane params and results ------------------------------------------------------------


class CheckParams(types.RequestParams):
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


class CheckResult(types.Result):
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


class ApproveParams(types.RequestParams):
    code: str | None = Field(None, max_length=64)
    """The code as the sender passed it on (any case; spaces and dashes are ignored)."""
    pending_id: str | None = Field(None, max_length=128)
    """Instead of ``code``: the request's id from ``list`` (give exactly one of the two)."""
    by: Name
    """Who approves, e.g. cli or channel:console."""
    role: Role = "contact"


class ApproveResult(types.Result):
    record: PairedRecord
    request: PendingRequest
    """The pending request this approval closed (status approved)."""


class DenyParams(types.RequestParams):
    pending_id: str = Field(min_length=1, max_length=128)
    by: Name = "cli"


class DenyResult(types.Result):
    changed: bool
    """False when the request was already approved, denied or expired."""
    status: PendingStatus


class RevokeParams(types.RequestParams):
    channel: Name
    sender: RawId
    account: Name | None = None
    """None revokes the sender on every account of the channel."""
    scope: Scope = "dm"
    platform: Name = "generic"


class RevokeResult(types.Result):
    revoked: int


class SeedParams(types.RequestParams):
    channel: Name
    account: Name = "default"
    platform: Name = "generic"
    senders: list[RawId] = Field(min_length=1, max_length=MAX_SEED)
    """Sender ids (scope dm) or group chat ids (scope group)."""
    role: Role = "contact"
    scope: Scope = "dm"
    by: Name


class SeedResult(types.Result):
    records: list[PairedRecord]
    changed: int
    """Records created, re-activated or given a new role; the rest were already paired as asked."""


class ListParams(types.RequestParams):
    channel: Name | None = None
    include_revoked: bool = False


class ListResult(types.Result):
    records: list[PairedRecord]
    pending: list[PendingRequest]
    """Open requests (unexpired, neither approved nor denied), oldest first."""
    lockout: Lockout


class CheckRequest(types.Request[CheckParams, Literal["nexo/pairing/check"]]):
    method: Literal["nexo/pairing/check"] = "nexo/pairing/check"


class ApproveRequest(types.Request[ApproveParams, Literal["nexo/pairing/approve"]]):
    method: Literal["nexo/pairing/approve"] = "nexo/pairing/approve"


class DenyRequest(types.Request[DenyParams, Literal["nexo/pairing/deny"]]):
    method: Literal["nexo/pairing/deny"] = "nexo/pairing/deny"


class RevokeRequest(types.Request[RevokeParams, Literal["nexo/pairing/revoke"]]):
    method: Literal["nexo/pairing/revoke"] = "nexo/pairing/revoke"


class SeedRequest(types.Request[SeedParams, Literal["nexo/pairing/seed"]]):
    method: Literal["nexo/pairing/seed"] = "nexo/pairing/seed"


class ListRequest(types.Request[ListParams, Literal["nexo/pairing/list"]]):
    method: Literal["nexo/pairing/list"] = "nexo/pairing/list"
