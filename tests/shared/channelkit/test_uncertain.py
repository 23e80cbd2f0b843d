"""Sends of unknown outcome: only a killed process leaves one, and a platform that can look settles it."""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from shared.channelkit import Unreachable, define_channel
from shared.channelkit.outbox import OutboxEntry
from tests.shared.test_channelkit_kit import NOW, KitSettings, ManualClock, Platform, build, send_message

pytestmark = pytest.mark.anyio


class Checking(Platform):
    """A platform that stamps the idempotency key on each message and can look it up afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: dict[str, str] = {}
        """idempotency key -> the platform's id, for messages that reached the other side."""
        self.blind: set[str] = set()
        """Keys the platform cannot look up now."""
        self.keys: list[str] = []

    async def send_keyed(self, chat_id: str, text: str, reply_to: str | None, key: str) -> str:
        self.keys.append(key)
        return await self.send(chat_id, text, reply_to)

    async def was_delivered(self, entry: OutboxEntry) -> str | None:
        if entry.idempotency_key in self.blind:
            raise Unreachable("the platform's history is down")
        return self.arrived.get(entry.idempotency_key)


def build_checking(tmp_path: Path, platform: Checking) -> MCPServer[Any]:
    return define_channel(
        "kittest",
        settings=KitSettings(state_dir=tmp_path),
        receive=platform.receive,
        send_keyed=platform.send_keyed,
        was_delivered=platform.was_delivered,
        instructions="test channel",
        clock=lambda: NOW,
        monotonic=ManualClock(),
    )


def killed_mid_send(tmp_path: Path) -> None:
    """What a process killed during its sends leaves in the outbox: its entries still ``sending``."""
    with closing(sqlite3.connect(tmp_path / "kittest" / "kittest.db")) as conn, conn:
        conn.execute("UPDATE outbox SET status = 'sending' WHERE status = 'pending'")


async def test_a_send_in_flight_when_the_server_stops_finishes_and_is_recorded(tmp_path: Path) -> None:
    platform = Platform()
    platform.held.add("in flight")
    async with Client(build(tmp_path, platform)) as client:
        stopping = anyio.CancelScope()

        async def send() -> None:
            with stopping:
                await platform.live.send("in flight", "c1", None, "k", False)

        async with anyio.create_task_group() as tg:
            tg.start_soon(send)
            with anyio.fail_after(5):
                await platform.entered.wait()
            stopping.cancel()
            await anyio.wait_all_tasks_blocked()
            platform.release.set()
        again = await send_message(client, text="in flight", chat_id="c1", idempotency_key="k")
    assert stopping.cancelled_caught
    assert platform.sent == [("c1", "in flight", None)]
    assert again.structured_content == {
        "status": "duplicate",
        "message_id": "1",
        "platform_message_id": "p-1",
        "state": "sent",
    }


async def test_a_send_in_flight_when_the_process_was_killed_is_uncertain_after_the_restart(
    tmp_path: Path,
) -> None:
    async with Client(build(tmp_path, Platform())) as client:
        await send_message(client, text="in flight", chat_id="c2", idempotency_key="k")
    killed_mid_send(tmp_path)
    restarted = Platform()
    restarted.reachable.add("c2")
    async with Client(build(tmp_path, restarted)) as client:
        again = await send_message(client, text="in flight", chat_id="c2", idempotency_key="k")
        entry = await restarted.live.outbox.get(1)
    assert again.structured_content == {
        "status": "duplicate",
        "message_id": "1",
        "platform_message_id": None,
        "state": "uncertain",
    }
    assert entry is not None
    assert entry.error == "interrupted by a restart"
    assert restarted.sent == []


async def test_uncertain_sends_are_settled_by_asking_the_platform_at_the_start(tmp_path: Path) -> None:
    first = Checking()
    async with Client(build_checking(tmp_path, first)) as client:
        for key in ("arrived", "lost", "unknown"):
            await send_message(client, text=key, chat_id="c2", idempotency_key=key)
    killed_mid_send(tmp_path)
    restarted = Checking()
    restarted.reachable.add("c2")
    restarted.arrived["arrived"] = "p-earlier"
    restarted.blind.add("unknown")
    async with Client(build_checking(tmp_path, restarted)) as client:
        entries = [await restarted.live.outbox.get(n) for n in (1, 2, 3)]
        again = await send_message(client, text="lost", chat_id="c2", idempotency_key="lost")
    assert first.sent == []  # c2 was unreachable: all three queued
    assert [(e.status, e.provider_id) for e in entries if e is not None] == [
        ("sent", "p-earlier"),
        ("sent", "p-1"),
        ("uncertain", None),
    ]
    assert restarted.sent == [("c2", "lost", None)]
    assert restarted.keys == ["lost"]
    assert again.structured_content is not None
    assert (again.structured_content["status"], again.structured_content["state"]) == ("duplicate", "sent")


def test_a_channel_gives_send_or_send_keyed_exactly_once(tmp_path: Path) -> None:
    platform = Checking()
    settings = KitSettings(state_dir=tmp_path)
    with pytest.raises(ValueError, match="not both"):
        define_channel(
            "kittest",
            settings=settings,
            receive=platform.receive,
            send=platform.send,
            send_keyed=platform.send_keyed,
            instructions="x",
        )
    with pytest.raises(ValueError, match="give send="):
        define_channel("kittest", settings=settings, receive=platform.receive, instructions="x")


class Said(logging.Handler):
    """Sets ``event`` once a log record contains ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.event = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


async def test_a_start_waits_for_the_sends_its_predecessor_is_still_finishing(tmp_path: Path) -> None:
    stopping, starting = Platform(), Platform()
    stopping.held.add("slow")
    waiting = Said("waiting for another process to finish its sends")
    logger = logging.getLogger("nexo.channel")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(waiting)
    results = []
    try:
        async with Client(build(tmp_path, stopping)) as old, anyio.create_task_group() as tg:
            tg.start_soon(lambda: send_message(old, text="slow", chat_id="c1", idempotency_key="k"))
            with anyio.fail_after(5):
                await stopping.entered.wait()

            async def start_again() -> None:
                async with Client(build(tmp_path, starting)) as new:
                    results.append(await send_message(new, text="slow", chat_id="c1", idempotency_key="k"))

            tg.start_soon(start_again)
            try:
                with anyio.fail_after(5):
                    await waiting.event.wait()
            finally:
                stopping.release.set()  # a send in flight is never abandoned: let it end either way
    finally:
        logger.removeHandler(waiting)
        logger.setLevel(level)
    assert (stopping.sent, starting.sent) == ([("c1", "slow", None)], [])
    assert [result.structured_content for result in results] == [
        {"status": "duplicate", "message_id": "1", "platform_message_id": "p-1", "state": "sent"}
    ]
