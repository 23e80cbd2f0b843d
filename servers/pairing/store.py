"""The pairing store: the gate's ``check`` and the operator calls (approve, deny, revoke, seed, list).

Paired senders, pending codes and the approval lockout live in one SQLite file; no MCP imports.
The gate is in ``gate.py``, codes in ``codes.py``, the limits and lockout in ``limits.py``, rows and
writes in ``records.py`` and the schema in ``schema.py``; this module is where callers import from.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from servers.pairing.codes import CodeBook
from servers.pairing.errors import CodeRefused, InvalidRequest, PairingError, PendingNotFound
from servers.pairing.gate import Gate
from servers.pairing.limits import Limits, count_failure, lockout_refusal, lockout_state
from servers.pairing.records import (
    PENDING_COLUMNS,
    list_paired_and_pending,
    normalize_id,
    pair,
    request_from_row,
)
from servers.pairing.schema import MIGRATIONS, Clock, iso, utc_now
from shared.db import Database, Transaction
from shared.protocol.identities import InvalidCode, normalize_code
from shared.protocol.pairing import (
    CheckParams,
    CheckResult,
    Lockout,
    PairedRecord,
    PendingRequest,
    PendingStatus,
    Role,
    Scope,
)

__all__ = ["MIGRATIONS", "Clock", "CodeBook", "Limits", "PairingStore", "iso", "utc_now"]


class PairingStore:
    def __init__(
        self, db: Database, codes: CodeBook, limits: Limits | None = None, *, clock: Clock = utc_now
    ) -> None:
        self.db = db
        self.codes = codes
        self.limits = limits or Limits()
        self.clock = clock
        self.gate = Gate(db, codes, self.limits, clock=clock)

    async def check(self, params: CheckParams) -> CheckResult:
        """The verdict on one inbound message. A storage failure drops it (fail closed) and is logged."""
        return await self.gate.check(params)

    async def approve(
        self, *, code: str | None = None, pending_id: str | None = None, by: str, role: Role = "contact"
    ) -> tuple[PairedRecord, PendingRequest]:
        """Pair the sender of one open request, found by its code or its id. Every refusal but a
        lockout or a malformed code counts as a failed attempt; enough of them lock all approvals for
        a while. A malformed code cannot match any request, so it is a typo, never a guess."""
        find: Callable[[Transaction, str], Awaitable[PendingRequest | PairingError]]
        if code is not None and pending_id is None:
            try:
                find = partial(self._by_code, normalize_code(code))
            except InvalidCode as exc:
                raise CodeRefused(f"{exc} (a malformed code does not count toward the lockout)") from exc
        elif pending_id is not None and code is None:
            find = partial(self._by_id, pending_id)
        else:
            raise InvalidRequest(
                "give exactly one of code (as the sender passed it on) or pending_id (from `nexo pair list`)"
            )
        now = self.clock()
        async with self.db.transaction() as tx:
            refusal: PairingError | None = await lockout_refusal(tx, self.limits, now)
            if refusal is None:
                found = await find(tx, iso(now))
                if isinstance(found, PendingRequest):
                    record, _ = await pair(
                        tx, found.channel, found.account, "dm", found.sender, role, "approve", by, now
                    )
                    await tx.execute(
                        "UPDATE pending SET status = 'approved', resolved_at = ?, resolved_by = ?, "
                        "code_sealed = NULL WHERE id = ?",
                        (iso(now), by, found.pending_id),
                    )
                    return record, found.model_copy(update={"status": "approved"})
                refusal = await count_failure(tx, self.limits, found, now)
        raise refusal

    async def _by_id(self, pending_id: str, tx: Transaction, now: str) -> PendingRequest | PairingError:
        row = await tx.fetchone(f"SELECT {PENDING_COLUMNS} FROM pending WHERE id = ?", (pending_id,))
        if row is None:
            return PendingNotFound(
                f"no pending request {pending_id!r}: list the open ones with `nexo pair list`"
            )
        request = request_from_row(row, now)
        if request.status != "pending":
            return PendingNotFound(
                f"pending request {pending_id!r} is {request.status}; the sender gets a new code when they "
                "write again"
            )
        return request

    async def _by_code(self, normalized: str, tx: Transaction, now: str) -> PendingRequest | PairingError:
        row = await tx.fetchone(
            f"SELECT {PENDING_COLUMNS} FROM pending WHERE code_hash = ? ORDER BY created_at DESC LIMIT 1",
            (self.codes.digest(normalized),),
        )
        if row is None:
            return CodeRefused(
                f"code {normalized!r} matches no pending request: check it with the sender "
                "(`nexo pair list` shows who is waiting)"
            )
        request = request_from_row(row, now)
        if request.status == "approved":
            return CodeRefused(f"code {normalized!r} was already used: each code pairs one sender once")
        if request.status != "pending":
            return CodeRefused(
                f"code {normalized!r} is {request.status}; the sender gets a new code when they write again"
            )
        return request

    async def deny(self, pending_id: str, *, by: str) -> tuple[bool, PendingStatus]:
        """Close an open request without pairing; False (and its status) when it was already closed."""
        now = iso(self.clock())
        async with self.db.transaction() as tx:
            row = await tx.fetchone(f"SELECT {PENDING_COLUMNS} FROM pending WHERE id = ?", (pending_id,))
            if row is None:
                raise PendingNotFound(
                    f"no pending request {pending_id!r}: list the open ones with `nexo pair list`"
                )
            status = request_from_row(row, now).status
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
                record, was_changed = await pair(tx, channel, account, scope, sender, role, "seed", by, now)
                records.append(record)
                changed += was_changed
        return records, changed

    async def listing(
        self, *, channel: str | None = None, include_revoked: bool = False
    ) -> tuple[list[PairedRecord], list[PendingRequest], Lockout]:
        """Paired records, open pending requests (never their codes) and the lockout state."""
        now = self.clock()
        records, pending = await list_paired_and_pending(
            self.db, channel=channel, include_revoked=include_revoked, now=iso(now)
        )
        return records, pending, await lockout_state(self.db, self.limits, now)
