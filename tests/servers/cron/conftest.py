"""Shared pieces of the cron server tests: settings in tmp_path, a manual clock, a paced scheduler,
an in-memory client, and readers of the database file."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import anyio
import mcp_types as types
import pytest
from mcp.client import Client

from servers.cron.jitter import JitterKnobs
from servers.cron.scheduler import Seam, no_seam
from servers.cron.server import build_server
from servers.cron.settings import CronSettings
from servers.cron.state import CronState, open_state
from shared.protocol.cron import tool_meta

START = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
"""A Saturday, noon UTC."""
R = TypeVar("R", bound=types.Result)


@dataclass
class ManualClock:
    """Moves only when a test says so."""

    now: datetime = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now

    def set(self, moment: datetime) -> datetime:
        self.now = moment
        return moment


@dataclass
class Pacer:
    """The scheduler's wait function under test control: the scheduler sleeps until the test calls
    :meth:`step` (wake-ups are ignored, so every tick happens when the test says), and every sleep
    it asked for is recorded."""

    requested: list[float] = field(default_factory=list)
    _go: anyio.Event = field(default_factory=anyio.Event)
    _parked: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(self, woken: anyio.Event, timeout: float) -> None:
        self.requested.append(timeout)
        go = self._go
        self._parked.set()
        await go.wait()

    async def parked(self) -> None:
        """Wait until the scheduler has finished its tick and sleeps."""
        with anyio.fail_after(10):
            await self._parked.wait()

    async def step(self) -> None:
        """Let the scheduler tick once more (at the clock's time) and wait until that tick is done."""
        await self.parked()
        self._parked = anyio.Event()
        go, self._go = self._go, anyio.Event()
        go.set()
        await self.parked()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def make_settings(tmp_path: Path, **overrides: Any) -> CronSettings:
    values: dict[str, Any] = {"state_dir": tmp_path / "state", "jitter": JitterKnobs(enabled=False)}
    values.update(overrides)
    return CronSettings(**values)


@pytest.fixture
def settings(tmp_path: Path) -> CronSettings:
    return make_settings(tmp_path)


@asynccontextmanager
async def opened(
    settings: CronSettings, clock: ManualClock, *, seam: Seam = no_seam
) -> AsyncIterator[CronState]:
    """The server's state with the scheduler stopped: tests call ``state.tick(now)``."""
    async with open_state(settings, clock=clock, seam=seam, run_scheduler=False) as state:
        yield state


@asynccontextmanager
async def connected(
    settings: CronSettings, clock: ManualClock, *, pacer: Pacer | None = None
) -> AsyncIterator[Client]:
    """An in-memory client; with a pacer the scheduler runs in the background at the pacer's pace."""
    server = build_server(
        settings,
        clock=clock,
        wait=pacer or Pacer(),
        monotonic=lambda: 0.0,
        run_scheduler=pacer is not None,
    )
    async with Client(server) as client:
        yield client


async def ask(client: Client, request: types.Request[Any, Any], result: type[R]) -> R:
    return await client.session.send_request(request, result)


async def call(
    client: Client, tool: str, arguments: dict[str, Any] | None = None, /, **meta: Any
) -> dict[str, Any]:
    """A tool call that must succeed; its structured result."""
    result = await client.call_tool(tool, arguments or {}, meta=tool_meta(**meta) if meta else None)
    assert result.is_error is False, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


async def refused(client: Client, tool: str, arguments: dict[str, Any], /, **meta: Any) -> str:
    """A tool call that must come back as a tool error; its text."""
    result = await client.call_tool(tool, arguments, meta=tool_meta(**meta) if meta else None)
    assert result.is_error is True
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


def rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def events(path: Path, kind: str | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, dedupe key, payload) of every event in the log, oldest first."""
    found = rows(path, "SELECT kind, dedupe_key, payload FROM events ORDER BY seq")
    return [(k, key, json.loads(payload)) for k, key, payload in found if kind is None or k == kind]


def fire_rows(path: Path, entry_id: str | None = None) -> list[tuple[str, str, str]]:
    """(slot, status, reason) of the fire rows, by slot."""
    sql = "SELECT slot, status, reason FROM fires"
    params: tuple[Any, ...] = ()
    if entry_id is not None:
        sql += " WHERE entry_id = ?"
        params = (entry_id,)
    return [(str(a), str(b), str(c)) for a, b, c in rows(path, sql + " ORDER BY slot", params)]


def at(hour: int, minute: int = 0, *, day: int = 21) -> datetime:
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")
