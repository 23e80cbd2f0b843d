"""The gate: the verdict on one inbound message, and the pairing code an unknown sender is challenged with.

It fails closed: when the database fails, ``check`` drops the message and logs why.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
from datetime import datetime

from servers.pairing.codes import CodeBook, challenge_reply
from servers.pairing.errors import InvalidRequest, SealBroken
from servers.pairing.limits import Limits
from servers.pairing.records import active_record, clean_display_name, normalize_id
from servers.pairing.schema import Clock, iso
from shared.db import Database, DatabaseError, Transaction
from shared.protocol.identities import InvalidSender, listed_owner, normalize_chat, normalize_sender
from shared.protocol.pairing import CheckParams, CheckResult, Reason, Role

logger = logging.getLogger("nexo.pairing")

STORAGE_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, DatabaseError, SealBroken)
"""What makes ``check`` fail closed instead of answering."""


def _drop(reason: Reason) -> CheckResult:
    return CheckResult(verdict="drop", reason=reason)


def _allow(role: Role, reason: Reason) -> CheckResult:
    return CheckResult(verdict="allow", role=role, reason=reason)


class Gate:
    """Decides who reaches the model: owners, paired senders and groups, the policy, and challenges."""

    def __init__(self, db: Database, codes: CodeBook, limits: Limits, *, clock: Clock) -> None:
        self.db = db
        self.codes = codes
        self.limits = limits
        self.clock = clock

    async def check(self, params: CheckParams) -> CheckResult:
        """The verdict on one inbound message. A storage failure drops it (fail closed) and is logged."""
        for raw in params.allow_from:  # an entry not valid on the platform is the caller's to fix
            normalize_id(params.platform, raw, "dm")
        try:
            sender = normalize_sender(params.platform, params.sender)
        except InvalidSender:
            return _drop("invalid_sender")
        try:
            if params.scope == "group":
                return await self._check_group(params, params.chat_id)
            return await self._check_dm(params, sender)
        except STORAGE_ERRORS as exc:
            logger.error(
                "pairing check failed closed (message dropped): channel=%s account=%s scope=%s: %s",
                params.channel,
                params.account,
                params.scope,
                exc,
            )
            return _drop("storage_error")

    async def _check_dm(self, params: CheckParams, sender: str) -> CheckResult:
        policy = params.policy.dm
        if policy == "disabled":
            return _drop("dm_disabled")
        if listed_owner(params.platform, sender, params.allow_from, scope="dm", dm_policy=policy):
            return _allow("owner", "allow_from")
        record = await active_record(self.db, params.channel, params.account, "dm", sender)
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
            if await active_record(self.db, params.channel, params.account, "group", chat) is None:
                return _drop("group_not_allowed")
            reason = "paired_group"
        if params.policy.require_mention and not params.mentioned:
            return _drop("mention_required")
        return _allow("contact", reason)

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
