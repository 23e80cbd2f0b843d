"""Paired records and pending requests: ids and names in their stored form, rows, writes and listing."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from servers.pairing.errors import InvalidRequest
from servers.pairing.schema import iso
from shared.db import Database, Transaction
from shared.protocol.identities import InvalidSender, normalize_chat, normalize_sender
from shared.protocol.pairing import PairedRecord, PendingRequest, Role, Scope, Via

DISPLAY_NAME_MAX = 128
RECORD_COLUMNS = "channel, account, scope, sender, role, paired_at, via, paired_by, revoked_at"
PENDING_COLUMNS = "id, channel, account, sender, display_name, created_at, expires_at, replies, status"


def record_from_row(row: Sequence[Any]) -> PairedRecord:
    """A ``paired`` row selected as RECORD_COLUMNS."""
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


def request_from_row(row: Sequence[Any], now: str) -> PendingRequest:
    """A ``pending`` row selected as PENDING_COLUMNS; an open one past its expiry reads as expired."""
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


def normalize_id(platform: str, raw: str, scope: Scope) -> str:
    """A sender (dm) or group chat id (group) in its stored form; raises InvalidRequest."""
    try:
        return normalize_chat(platform, raw) if scope == "group" else normalize_sender(platform, raw)
    except InvalidSender as exc:
        raise InvalidRequest(f"{exc} (platform {platform!r})") from exc


async def active_record(
    db: Database, channel: str, account: str, scope: Scope, sender: str
) -> PairedRecord | None:
    """The unrevoked record of one sender or group chat, if any."""
    row = await db.fetchone(
        f"SELECT {RECORD_COLUMNS} FROM paired "
        "WHERE channel = ? AND account = ? AND scope = ? AND sender = ? AND revoked_at IS NULL",
        (channel, account, scope, sender),
    )
    return None if row is None else record_from_row(row)


async def pair(
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
        f"SELECT {RECORD_COLUMNS} FROM paired WHERE channel = ? AND account = ? AND scope = ? AND sender = ?",
        key,
    )
    if row is not None:
        existing = record_from_row(row)
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


async def list_paired_and_pending(
    db: Database, *, channel: str | None, include_revoked: bool, now: str
) -> tuple[list[PairedRecord], list[PendingRequest]]:
    """Paired records (revoked ones too when asked) and open pending requests, of one channel or all."""
    where, params = ("WHERE channel = ?", [channel]) if channel is not None else ("WHERE 1", [])
    revoked = "" if include_revoked else " AND revoked_at IS NULL"
    records = await db.fetchall(
        f"SELECT {RECORD_COLUMNS} FROM paired {where}{revoked} ORDER BY channel, account, scope, sender",
        params,
    )
    pending = await db.fetchall(
        f"SELECT {PENDING_COLUMNS} FROM pending {where} AND status = 'pending' AND expires_at > ? "
        "ORDER BY created_at",
        [*params, now],
    )
    return [record_from_row(row) for row in records], [request_from_row(row, now) for row in pending]
