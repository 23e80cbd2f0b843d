"""Paired senders, pending codes and the approval lockout, in one SQLite file. No MCP imports.

Codes never reach the disk in plain text: each is stored as an HMAC-SHA256 (to match what the
operator types) and sealed with AES-GCM (to send the same code again to a sender who writes twice),
both under keys derived from the 32-byte ``code.key`` next to the database. The gate fails closed:
when the database fails, ``check`` drops the message and logs why.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import sqlite3
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from servers.pairing.errors import (
    CodeRefused,
    InvalidRequest,
    LockedOut,
    PairingError,
    PendingNotFound,
    SealBroken,
)
from servers.pairing.settings import PairingSettings
from shared.db import Database, DatabaseError, Migration, Transaction
from shared.protocol.pairing import (
    CODE_ALPHABET,
    CODE_LENGTH,
    CheckParams,
    CheckResult,
    InvalidCode,
    InvalidSender,
    Lockout,
    PairedRecord,
    PendingRequest,
    PendingStatus,
    Reason,
    Role,
    Scope,
    Via,
    normalize_chat,
    normalize_code,
    normalize_sender,
)

Clock = Callable[[], datetime]
logger = logging.getLogger("nexo.pairing")

DISPLAY_NAME_MAX = 128
RECORD_COLUMNS = "channel, account, scope, sender, role, paired_at, via, paired_by, revoked_at"
PENDING_COLUMNS = "id, channel, account, sender, display_name, created_at, expires_at, replies, status"

SCHEMA = Migration.sql(
    "pairing_0001_schema",
    """
    CREATE TABLE paired (
        channel TEXT NOT NULL,
        account TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('dm', 'group')),
        sender TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('owner', 'contact')),
        paired_at TEXT NOT NULL,
        via TEXT NOT NULL,
        paired_by TEXT NOT NULL,
        revoked_at TEXT,
        PRIMARY KEY (channel, account, scope, sender)
    ) WITHOUT ROWID;

    CREATE TABLE pending (
        id TEXT PRIMARY KEY,
        channel TEXT NOT NULL,
        account TEXT NOT NULL,
        sender TEXT NOT NULL,
        display_name TEXT,
        code_hash TEXT NOT NULL,
        code_sealed BLOB,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        replies INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied')),
        resolved_at TEXT,
        resolved_by TEXT
    );
    CREATE INDEX pending_sender ON pending(channel, account, sender, created_at);
    CREATE INDEX pending_open ON pending(channel, account, expires_at) WHERE status = 'pending';
    CREATE INDEX pending_code ON pending(code_hash);

    CREATE TABLE approve_failures (id INTEGER PRIMARY KEY, at TEXT NOT NULL);
    CREATE TABLE lockout (id INTEGER PRIMARY KEY CHECK (id = 1), until TEXT NOT NULL);
    """,
)
MIGRATIONS: tuple[Migration, ...] = (SCHEMA,)
STORAGE_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, DatabaseError, SealBroken)
"""What makes ``check`` fail closed instead of answering."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """Fixed width (microseconds, +00:00), so stored times compare correctly as text."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _shown_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds:g} s"


class CodeBook:
    """Issues codes and turns them into what is stored: a digest to match and a sealed copy."""

    def __init__(self, key: bytes) -> None:
        self._digest_key = self._derive(key, b"nexo/pairing code digest")
        self._aead = AESGCM(self._derive(key, b"nexo/pairing code seal"))

    @staticmethod
    def _derive(key: bytes, purpose: bytes) -> bytes:
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(key)

    @staticmethod
    def new_code() -> str:
        return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))

    def digest(self, code: str) -> str:
        return hmac.new(self._digest_key, code.encode(), hashlib.sha256).hexdigest()

    def seal(self, code: str, pending_id: str) -> bytes:
        """Encrypted and bound to its request: a sealed code copied to another row does not open."""
        nonce = secrets.token_bytes(12)
        return nonce + self._aead.encrypt(nonce, code.encode(), pending_id.encode())

    def unseal(self, sealed: bytes, pending_id: str) -> str:
        try:
            return self._aead.decrypt(sealed[:12], sealed[12:], pending_id.encode()).decode()
        except InvalidTag as exc:
            raise SealBroken(
                f"the stored code of pending request {pending_id!r} does not decrypt with the current "
                "code.key (was the key file replaced?); deny the request so the sender gets a new code"
            ) from exc


# -- rows ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Limits:
    max_pending: int = 3
    max_replies: int = 2
    new_code_interval: timedelta = timedelta(minutes=10)
    code_ttl: timedelta = timedelta(hours=1)
    lockout_failures: int = 5
    lockout_window: timedelta = timedelta(hours=1)
    lockout: timedelta = timedelta(hours=1)

    @classmethod
    def of(cls, settings: PairingSettings) -> Limits:
        return cls(
            max_pending=settings.max_pending,
            max_replies=settings.max_replies_per_pending,
            new_code_interval=timedelta(seconds=settings.new_code_interval_s),
            code_ttl=timedelta(seconds=settings.code_ttl_s),
            lockout_failures=settings.lockout_failures,
            lockout_window=timedelta(seconds=settings.lockout_window_s),
            lockout=timedelta(seconds=settings.lockout_s),
        )


def _record(row: Sequence[Any]) -> PairedRecord:
    channel, account, scope, sender, role, paired_at, via, by, revoked_at = row
    return PairedRecord(
        channel=channel,
        account=account,
        scope=scope,
        sender=sender,
        role=role,
        paired_at=paired_at,
        via=via,
        by=by,
        revoked_at=revoked_at,
    )


def _request(row: Sequence[Any], now: str) -> PendingRequest:
    pending_id, channel, account, sender, display_name, created_at, expires_at, replies, status = row
    if status == "pending" and expires_at <= now:
        status = "expired"
    return PendingRequest(
        pending_id=pending_id,
        channel=channel,
        account=account,
        sender=sender,
        display_name=display_name,
        created_at=created_at,
        expires_at=expires_at,
        replies=replies,
        status=status,
    )


def clean_display_name(name: str | None) -> str | None:
    """Without control, format (bidi, zero-width) or line-breaking characters, and short: safe to show."""
    if name is None:
        return None
    kept = "".join(" " if char.isspace() else char for char in name if unicodedata.category(char)[0] != "C")
    text = " ".join(kept.split())
    return text[:DISPLAY_NAME_MAX] or None


def challenge_reply(code: str, ttl: timedelta) -> str:
    return (
        f"I only talk with people my operator has approved. Your pairing code is {code}. Give it to "
        f"the operator, who approves you with: nexo pair approve {code}. The code expires in "
        f"{_duration(ttl)}."
    )


def normalize_id(platform: str, raw: str, scope: Scope) -> str:
    """A sender (dm) or group chat id (group) in its stored form; raises InvalidRequest."""
    try:
        return normalize_chat(platform, raw) if scope == "group" else normalize_sender(platform, raw)
    except InvalidSender as exc:
        raise InvalidRequest(f"{exc} (platform {platform!r})") from exc


def _drop(reason: Reason) -> CheckResult:
    return CheckResult(verdict="drop", reason=reason)


def _allow(role: Role, reason: Reason) -> CheckResult:
    return CheckResult(verdict="allow", role=role, reason=reason)


# -- the store -----------------------------------------------------------------------------------


class PairingStore:
    def __init__(
        self, db: Database, codes: CodeBook, limits: Limits | None = None, *, clock: Clock = utc_now
    ) -> None:
        self.db = db
        self.codes = codes
        self.limits = limits or Limits()
        self.clock = clock

    async def check(self, params: CheckParams) -> CheckResult:
        """The verdict on one inbound message. A storage failure drops it (fail closed) and is logged."""
        owners = {normalize_id(params.platform, raw, "dm") for raw in params.allow_from}
        try:
            sender = normalize_sender(params.platform, params.sender)
        except InvalidSender:
            return _drop("invalid_sender")
        try:
            if params.scope == "group":
                return await self._check_group(params, params.chat_id)
            return await self._check_dm(params, sender, owners)
        except STORAGE_ERRORS as exc:
            logger.error(
                "pairing check failed closed (message dropped): channel=%s account=%s scope=%s: %s",
                params.channel,
                params.account,
                params.scope,
                exc,
            )
            return _drop("storage_error")

    async def _check_dm(self, params: CheckParams, sender: str, owners: set[str]) -> CheckResult:
        policy = params.policy.dm
        if policy == "disabled":
            return _drop("dm_disabled")
        if sender in owners:
            return _allow("owner", "allow_from")
        record = await self._active(params.channel, params.account, "dm", sender)
        if record is not None:
            return _allow(record.role, "paired")
        if policy == "open":
            return _allow("contact", "open_policy")
        if policy == "allowlist":
            return _drop("unknown_sender")
        return await self._challenge(params, sender)

    async def _check_group(self, params: CheckParams, chat_id: str | None) -> CheckResult:
        if chat_id is None:
            raise InvalidRequest(
                "scope 'group' needs chat_id: pass the group's chat id, which keys the group"
            )
        policy = params.policy.group
        if policy == "disabled":
            return _drop("group_disabled")
        try:
            chat = normalize_chat(params.platform, chat_id)
        except InvalidSender:
            return _drop("invalid_chat")
        reason: Reason = "open_policy"
        if policy == "allowlist":
            if await self._active(params.channel, params.account, "group", chat) is None:
                return _drop("group_not_allowed")
            reason = "paired_group"
        if params.policy.require_mention and not params.mentioned:
            return _drop("mention_required")
        return _allow("contact", reason)

    async def _active(self, channel: str, account: str, scope: Scope, sender: str) -> PairedRecord | None:
        row = await self.db.fetchone(
            f"SELECT {RECORD_COLUMNS} FROM paired "
            "WHERE channel = ? AND account = ? AND scope = ? AND sender = ? AND revoked_at IS NULL",
            (channel, account, scope, sender),
        )
        return None if row is None else _record(row)

    async def _challenge(self, params: CheckParams, sender: str) -> CheckResult:
        now = self.clock()
        stamp, key = iso(now), (params.channel, params.account, sender)
        async with self.db.transaction() as tx:
            await self._clean(tx, now)
            row = await tx.fetchone(
                "SELECT id, code_sealed, replies FROM pending WHERE channel = ? AND account = ? "
                "AND sender = ? AND status = 'pending' AND expires_at > ? ORDER BY created_at DESC LIMIT 1",
                (*key, stamp),
            )
            if row is not None:
                pending_id, sealed, replies = row
                if replies >= self.limits.max_replies:
                    return CheckResult(verdict="challenge", reason="reply_cap", pending_id=pending_id)
                code = self.codes.unseal(sealed, pending_id)
                await tx.execute("UPDATE pending SET replies = replies + 1 WHERE id = ?", (pending_id,))
                return self._challenged(code, pending_id, "code_resent", new=False)
            recent = await tx.fetchone(
                "SELECT 1 FROM pending WHERE channel = ? AND account = ? AND sender = ? AND created_at > ?",
                (*key, iso(now - self.limits.new_code_interval)),
            )
            if recent is not None:
                return _drop("code_rate")
            (open_count,) = await tx.fetchone(
                "SELECT COUNT(*) FROM pending WHERE channel = ? AND account = ? "
                "AND status = 'pending' AND expires_at > ?",
                (params.channel, params.account, stamp),
            ) or (0,)
            if open_count >= self.limits.max_pending:
                return _drop("pending_full")
            code, digest = await self._fresh_code(tx)
            pending_id = f"pr_{secrets.token_hex(8)}"
            await tx.execute(
                "INSERT INTO pending(id, channel, account, sender, display_name, code_hash, code_sealed, "
                "created_at, expires_at, replies) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
                (
                    pending_id,
                    *key,
                    clean_display_name(params.display_name),
                    digest,
                    self.codes.seal(code, pending_id),
                    stamp,
                    iso(now + self.limits.code_ttl),
                ),
            )
        return self._challenged(code, pending_id, "code_issued", new=True)

    def _challenged(self, code: str, pending_id: str, reason: Reason, *, new: bool) -> CheckResult:
        return CheckResult(
            verdict="challenge",
            reason=reason,
            reply=challenge_reply(code, self.limits.code_ttl),
            code=code,
            pending_id=pending_id,
            new_pending=new,
        )

    async def _fresh_code(self, tx: Transaction) -> tuple[str, str]:
        while True:
            code = self.codes.new_code()
            digest = self.codes.digest(code)
            if await tx.fetchone("SELECT 1 FROM pending WHERE code_hash = ?", (digest,)) is None:
                return code, digest

    async def _clean(self, tx: Transaction, now: datetime) -> None:
        """Forget closed and expired requests once they no longer bear on the one-code-per-interval rule."""
        stamp = iso(now)
        await tx.execute(
            "UPDATE pending SET code_sealed = NULL "
            "WHERE status = 'pending' AND expires_at <= ? AND code_sealed IS NOT NULL",
            (stamp,),
        )
        await tx.execute(
            "DELETE FROM pending WHERE (status != 'pending' OR expires_at <= ?) AND created_at <= ?",
            (stamp, iso(now - self.limits.new_code_interval)),
        )
        await tx.execute(
            "DELETE FROM approve_failures WHERE at <= ?", (iso(now - self.limits.lockout_window),)
        )

    # -- operator calls --------------------------------------------------------------------------

    async def approve(
        self, *, code: str | None = None, pending_id: str | None = None, by: str, role: Role = "contact"
    ) -> tuple[PairedRecord, PendingRequest]:
        """Pair the sender of one open request, found by its code or its id. Every refusal but a
        lockout counts as a failed attempt; enough of them lock all approvals for a while."""
        find: Callable[[Transaction, str], Awaitable[PendingRequest | PairingError]]
        if code is not None and pending_id is None:
            find = partial(self._by_code, code)
        elif pending_id is not None and code is None:
            find = partial(self._by_id, pending_id)
        else:
            raise InvalidRequest(
                "give exactly one of code (as the sender passed it on) or pending_id (from `nexo pair list`)"
            )
        now = self.clock()
        async with self.db.transaction() as tx:
            refusal: PairingError | None = await self._lockout_refusal(tx, now)
            if refusal is None:
                found = await find(tx, iso(now))
                if isinstance(found, PendingRequest):
                    record, _ = await self._pair(
                        tx, found.channel, found.account, "dm", found.sender, role, "approve", by, now
                    )
                    await tx.execute(
                        "UPDATE pending SET status = 'approved', resolved_at = ?, resolved_by = ?, "
                        "code_sealed = NULL WHERE id = ?",
                        (iso(now), by, found.pending_id),
                    )
                    return record, found.model_copy(update={"status": "approved"})
                refusal = await self._count_failure(tx, found, now)
        raise refusal

    async def _lockout_refusal(self, tx: Transaction, now: datetime) -> LockedOut | None:
        row = await tx.fetchone("SELECT until FROM lockout WHERE id = 1 AND until > ?", (iso(now),))
        if row is None:
            return None
        until = datetime.fromisoformat(row[0])
        return LockedOut(
            f"approvals are locked until {_shown_time(until)} (in {_duration(until - now)}) after "
            f"{self.limits.lockout_failures} failed attempts; wait until then, and check the code with "
            "the sender first (`nexo pair list` shows who is waiting)"
        )

    async def _by_id(self, pending_id: str, tx: Transaction, now: str) -> PendingRequest | PairingError:
        row = await tx.fetchone(f"SELECT {PENDING_COLUMNS} FROM pending WHERE id = ?", (pending_id,))
        if row is None:
            return PendingNotFound(
                f"no pending request {pending_id!r}: list the open ones with `nexo pair list`"
            )
        request = _request(row, now)
        if request.status != "pending":
            return PendingNotFound(
                f"pending request {pending_id!r} is {request.status}; the sender gets a new code when they "
                "write again"
            )
        return request

    async def _by_code(self, code: str, tx: Transaction, now: str) -> PendingRequest | PairingError:
        try:
            normalized = normalize_code(code)
        except InvalidCode as exc:
            return CodeRefused(str(exc))
        row = await tx.fetchone(
            f"SELECT {PENDING_COLUMNS} FROM pending WHERE code_hash = ? ORDER BY created_at DESC LIMIT 1",
            (self.codes.digest(normalized),),
        )
        if row is None:
            return CodeRefused(
                f"code {normalized!r} matches no pending request: check it with the sender "
                "(`nexo pair list` shows who is waiting)"
            )
        request = _request(row, now)
        if request.status == "approved":
            return CodeRefused(f"code {normalized!r} was already used: each code pairs one sender once")
        if request.status != "pending":
            return CodeRefused(
                f"code {normalized!r} is {request.status}; the sender gets a new code when they write again"
            )
        return request

    async def _count_failure(self, tx: Transaction, refusal: PairingError, now: datetime) -> PairingError:
        limits = self.limits
        await tx.execute("INSERT INTO approve_failures(at) VALUES (?)", (iso(now),))
        (failures,) = await tx.fetchone(
            "SELECT COUNT(*) FROM approve_failures WHERE at > ?", (iso(now - limits.lockout_window),)
        ) or (0,)
        window = _duration(limits.lockout_window)
        if failures < limits.lockout_failures:
            left = limits.lockout_failures - failures
            locks = _duration(limits.lockout)
            note = f" ({left} more failed attempt(s) within {window} lock approvals for {locks})"
        else:
            until = now + limits.lockout
            await tx.execute(
                "INSERT INTO lockout(id, until) VALUES (1, ?) "
                "ON CONFLICT(id) DO UPDATE SET until = excluded.until",
                (iso(until),),
            )
            await tx.execute("DELETE FROM approve_failures")
            note = (
                f" ({failures} failed attempts within {window}: approvals are now locked until "
                f"{_shown_time(until)})"
            )
        return type(refusal)(str(refusal) + note)

    async def _pair(
        self,
        tx: Transaction,
        channel: str,
        account: str,
        scope: Scope,
        sender: str,
        role: Role,
        via: Via,
        by: str,
        now: datetime,
    ) -> tuple[PairedRecord, bool]:
        """Create, re-activate or re-role one record; False when it was already paired as asked."""
        key = (channel, account, scope, sender)
        row = await tx.fetchone(
            f"SELECT {RECORD_COLUMNS} FROM paired "
            "WHERE channel = ? AND account = ? AND scope = ? AND sender = ?",
            key,
        )
        if row is not None:
            existing = _record(row)
            if existing.revoked_at is None and existing.role == role:
                return existing, False
        record = PairedRecord(
            channel=channel,
            account=account,
            scope=scope,
            sender=sender,
            role=role,
            paired_at=iso(now),
            via=via,
            by=by,
        )
        await tx.execute(
            f"INSERT INTO paired({RECORD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL) "
            "ON CONFLICT(channel, account, scope, sender) DO UPDATE SET role = excluded.role, "
            "paired_at = excluded.paired_at, via = excluded.via, paired_by = excluded.paired_by, "
            "revoked_at = NULL",
            (*key, role, record.paired_at, via, by),
        )
        return record, True

    async def deny(self, pending_id: str, *, by: str) -> tuple[bool, PendingStatus]:
        """Close an open request without pairing; False (and its status) when it was already closed."""
        now = iso(self.clock())
        async with self.db.transaction() as tx:
            row = await tx.fetchone(f"SELECT {PENDING_COLUMNS} FROM pending WHERE id = ?", (pending_id,))
            if row is None:
                raise PendingNotFound(
                    f"no pending request {pending_id!r}: list the open ones with `nexo pair list`"
                )
            status = _request(row, now).status
            if status != "pending":
                return False, status
            await tx.execute(
                "UPDATE pending SET status = 'denied', resolved_at = ?, resolved_by = ?, code_sealed = NULL "
                "WHERE id = ?",
                (now, by, pending_id),
            )
        return True, "denied"

    async def revoke(
        self, *, channel: str, sender: str, account: str | None, scope: Scope, platform: str
    ) -> int:
        """Soft-delete the record(s) of one sender or group chat; returns how many were active."""
        normalized = normalize_id(platform, sender, scope)
        sql = (
            "UPDATE paired SET revoked_at = ? "
            "WHERE channel = ? AND scope = ? AND sender = ? AND revoked_at IS NULL"
        )
        params: list[Any] = [iso(self.clock()), channel, scope, normalized]
        if account is not None:
            sql += " AND account = ?"
            params.append(account)
        return await self.db.execute(sql, params)

    async def seed(
        self,
        *,
        channel: str,
        account: str,
        platform: str,
        senders: Sequence[str],
        role: Role,
        scope: Scope,
        by: str,
    ) -> tuple[list[PairedRecord], int]:
        """Pair senders (or group chats) directly, all or none; returns the records and how many changed."""
        normalized: list[str] = []
        for index, raw in enumerate(senders):
            try:
                value = normalize_id(platform, raw, scope)
            except InvalidRequest as exc:
                raise InvalidRequest(f"senders[{index}]: {exc}; nothing was seeded") from exc
            if value not in normalized:
                normalized.append(value)
        now = self.clock()
        records: list[PairedRecord] = []
        changed = 0
        async with self.db.transaction() as tx:
            for sender in normalized:
                record, was_changed = await self._pair(
                    tx, channel, account, scope, sender, role, "seed", by, now
                )
                records.append(record)
                changed += was_changed
        return records, changed

    async def listing(
        self, *, channel: str | None = None, include_revoked: bool = False
    ) -> tuple[list[PairedRecord], list[PendingRequest], Lockout]:
        """Paired records, open pending requests (never their codes) and the lockout state."""
        now = self.clock()
        stamp = iso(now)
        where, params = ("WHERE channel = ?", [channel]) if channel is not None else ("WHERE 1", [])
        revoked = "" if include_revoked else " AND revoked_at IS NULL"
        records = await self.db.fetchall(
            f"SELECT {RECORD_COLUMNS} FROM paired {where}{revoked} ORDER BY channel, account, scope, sender",
            params,
        )
        pending = await self.db.fetchall(
            f"SELECT {PENDING_COLUMNS} FROM pending {where} AND status = 'pending' AND expires_at > ? "
            "ORDER BY created_at",
            [*params, stamp],
        )
        until = await self.db.fetchone("SELECT until FROM lockout WHERE id = 1 AND until > ?", (stamp,))
        (failures,) = await self.db.fetchone(
            "SELECT COUNT(*) FROM approve_failures WHERE at > ?", (iso(now - self.limits.lockout_window),)
        ) or (0,)
        return (
            [_record(row) for row in records],
            [_request(row, stamp) for row in pending],
            Lockout(until=None if until is None else until[0], failures=failures),
        )
