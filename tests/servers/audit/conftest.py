"""Shared pieces of the audit server tests: settings in tmp_path, a manual clock, entry builders."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from servers.audit.server import build_server
from servers.audit.settings import AuditSettings
from servers.audit.store import Ledger, open_database
from shared.protocol.audit.bodies import ApprovalAnsweredBody, NoticeBody, ToolCallBody, TurnBody
from shared.protocol.audit.digest import args_digest
from shared.protocol.audit.entries import EntryDraft

START = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
GUARD_TRIGGERS = ("ledger_no_update", "ledger_no_delete")


@dataclass
class ManualClock:
    """Moves only when a test says so; every reading is one microsecond after the previous one,
    so entry times are distinct and predictable."""

    now: datetime = START
    step: timedelta = field(default=timedelta(microseconds=1))

    def __call__(self) -> datetime:
        value = self.now
        self.now += self.step
        return value

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def settings(tmp_path: Path) -> AuditSettings:
    return AuditSettings(state_dir=tmp_path / "state", trim_interval_s=0)


@asynccontextmanager
async def opened_ledger(path: Path, clock: ManualClock | None = None) -> AsyncIterator[Ledger]:
    async with open_database(path) as db:
        yield Ledger(db, clock=clock or ManualClock())


@asynccontextmanager
async def connected(settings: AuditSettings, clock: ManualClock | None = None) -> AsyncIterator[Client]:
    async with Client(build_server(settings, clock=clock or ManualClock())) as client:
        yield client


def turn(
    goal_id: str, index: int, *, outcome: str = "answered", decision: str = "", **extra: Any
) -> EntryDraft:
    body = TurnBody(index=index, outcome=outcome, decision=decision or f"decision {index}", **extra)
    return EntryDraft.of(body, source="channel:console", agent="nexo", goal_id=goal_id)


def tool_call(goal_id: str | None, tool: str = "time__now", *, outcome: str = "ok") -> EntryDraft:
    body = ToolCallBody(tool=tool, args_sha256=args_digest({"tz": "UTC"}), duration_ms=2.5, outcome=outcome)
    return EntryDraft.of(
        body, source="channel:console", agent="nexo", goal_id=goal_id, subject=f"called {tool}"
    )


def answer(goal_id: str, request_id: str) -> EntryDraft:
    body = ApprovalAnsweredBody(request_id=request_id, behavior="allow", answered_by="channel:console")
    return EntryDraft.of(body, source="channel:console", agent="nexo", goal_id=goal_id)


def notice(message: str, *, source: str = "heartbeat") -> EntryDraft:
    return EntryDraft.of(NoticeBody(level="info", message=message), source=source, subject=message)


def tamper(path: Path, *statements: str | tuple[str, tuple[Any, ...]]) -> None:
    """Edit the file as an attacker with write access would: drop the guard triggers first."""
    conn = sqlite3.connect(path)
    try:
        for trigger in GUARD_TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        for statement in statements:
            sql, params = (statement, ()) if isinstance(statement, str) else statement
            conn.execute(sql, params)
        conn.commit()
    finally:
        conn.close()


def rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()
