"""Shared pieces of the pairing server tests: settings in tmp_path, a manual clock, request builders."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from servers.pairing.server import build_server, open_store
from servers.pairing.settings import PairingSettings
from servers.pairing.store import PairingStore
from shared.protocol.pairing import CheckParams, Policy

START = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
CHANNEL = "telegram"


@dataclass
class ManualClock:
    """Moves only when a test says so."""

    now: datetime = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def settings(tmp_path: Path) -> PairingSettings:
    return PairingSettings(state_dir=tmp_path / "state")


@pytest.fixture
async def store(settings: PairingSettings, clock: ManualClock) -> AsyncIterator[PairingStore]:
    async with open_store(settings, clock=clock) as opened:
        yield opened


@asynccontextmanager
async def connected(settings: PairingSettings, clock: ManualClock | None = None) -> AsyncIterator[Client]:
    async with Client(build_server(settings, clock=clock or ManualClock())) as client:
        yield client


def dm(sender: str, *, policy: Policy | None = None, **extra: Any) -> CheckParams:
    """A direct message on the Telegram channel's default account."""
    fields: dict[str, Any] = {"channel": CHANNEL, "platform": "telegram", "sender": sender, **extra}
    return CheckParams(policy=policy or Policy(), **fields)


def group(sender: str, chat_id: str, *, policy: Policy, mentioned: bool = True, **extra: Any) -> CheckParams:
    """A message in a Telegram group chat."""
    return CheckParams(
        channel=CHANNEL,
        platform="telegram",
        sender=sender,
        scope="group",
        chat_id=chat_id,
        mentioned=mentioned,
        policy=policy,
        **extra,
    )


def stored_bytes(settings: PairingSettings) -> bytes:
    """Everything on disk under the database's name: the main file, its WAL and shared memory."""
    database = settings.database
    files = [database, database.with_name(database.name + "-wal"), database.with_name(database.name + "-shm")]
    return b"".join(path.read_bytes() for path in files if path.exists())
