"""The typing indicator: shown at once and again every interval, until a reply goes out or max_s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from shared.channelkit import Typing, define_channel
from tests.shared.test_channelkit_kit import NOW, KitSettings, ManualClock, Platform

pytestmark = pytest.mark.anyio


class Shows:
    """The platform's ``show``: counts calls per chat, can fail, can move a clock on each call."""

    def __init__(
        self, *, calls_until_event: int = 3, fail: bool = False, clock: ManualClock | None = None
    ) -> None:
        self.calls: list[str] = []
        self.enough = anyio.Event()
        self._until = calls_until_event
        self._fail = fail
        self._clock = clock

    async def __call__(self, chat_id: str) -> None:
        self.calls.append(chat_id)
        if len(self.calls) >= self._until:
            self.enough.set()
        if self._clock is not None:
            self._clock.now += 10
        if self._fail:
            raise ConnectionError("platform said no")


def build(tmp_path: Path, platform: Platform, shows: Shows) -> MCPServer[Any]:
    return define_channel(
        "kittest",
        settings=KitSettings(state_dir=tmp_path),
        receive=platform.receive,
        send=platform.send,
        typing=shows,
        typing_interval_s=0.001,
        instructions="test channel",
        clock=lambda: NOW,
    )


@pytest.mark.parametrize("fail", [False, True])
async def test_typing_repeats_until_the_reply_goes_out_even_when_show_fails(
    tmp_path: Path, fail: bool
) -> None:
    platform, shows = Platform(), Shows(fail=fail)
    async with Client(build(tmp_path, platform, shows)) as client:
        platform.live.typing_started("c1")
        with anyio.fail_after(5):
            await shows.enough.wait()
        typing = platform.live.typing
        assert typing is not None
        showing = typing.showing
        await client.call_tool("send_message", {"text": "done", "chat_id": "c1"})
        after_reply = typing.showing
        calls = len(shows.calls)
        await anyio.wait_all_tasks_blocked()
    assert (showing, after_reply) == (frozenset({"c1"}), frozenset())
    assert set(shows.calls) == {"c1"}
    assert len(shows.calls) == calls  # nothing shown after the reply
    assert platform.sent == [("c1", "done", None)]


async def test_without_typing_typing_started_does_nothing(tmp_path: Path) -> None:
    platform = Platform()
    server = define_channel(
        "kittest",
        settings=KitSettings(state_dir=tmp_path),
        receive=platform.receive,
        send=platform.send,
        instructions="test channel",
    )
    async with Client(server):
        platform.live.typing_started("c1")
    assert platform.live.typing is None


async def test_typing_stops_by_itself_after_max_s() -> None:
    clock = ManualClock()
    shows = Shows(clock=clock, calls_until_event=100)
    typing = Typing(shows, interval_s=0, max_s=25, clock=clock)
    async with anyio.create_task_group() as tg:
        typing.bind(tg)
        typing.start("c1")
        with anyio.fail_after(5):
            await typing.until_stopped("c1")
    assert shows.calls == ["c1", "c1", "c1"]  # at 0, 10 and 20; at 30 the 25 s are over
    assert typing.showing == frozenset()


async def test_a_new_message_while_typing_restarts_the_max_s() -> None:
    clock = ManualClock()
    typing: Typing
    shows_calls: list[str] = []

    async def show(chat_id: str) -> None:
        shows_calls.append(chat_id)
        clock.now += 10
        if len(shows_calls) == 2:
            typing.start(chat_id)  # another message at t=20: typing lasts until 45

    typing = Typing(show, interval_s=0, max_s=25, clock=clock)
    async with anyio.create_task_group() as tg:
        typing.bind(tg)
        typing.start("c1")
        with anyio.fail_after(5):
            await typing.until_stopped("c1")
    assert len(shows_calls) == 5  # at 0, 10, 20, 30, 40


async def test_typing_before_the_channel_runs_is_an_error() -> None:
    async def show(chat_id: str) -> None:
        raise AssertionError("never shown")

    with pytest.raises(RuntimeError, match="call it from receive"):
        Typing(show).start("c1")


def test_nonsense_intervals_are_refused() -> None:
    async def show(chat_id: str) -> None:
        raise AssertionError("never shown")

    with pytest.raises(ValueError, match="interval_s >= 0 and max_s > 0"):
        Typing(show, max_s=0)


async def test_a_file_sent_to_the_chat_stops_typing_too(tmp_path: Path) -> None:
    platform, shows = Platform(), Shows(calls_until_event=1)
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "chart.png").write_bytes(b"\x89PNG")
    files: list[str] = []

    async def send_file(
        chat_id: str, path: Path, caption: str | None, reply_to: str | None, mime: str
    ) -> str:
        files.append(mime)
        return "f-1"

    server = define_channel(
        "kittest",
        settings=KitSettings(state_dir=tmp_path),
        receive=platform.receive,
        send=platform.send,
        send_file=send_file,
        typing=shows,
        typing_interval_s=0.001,
        instructions="test channel",
    )
    async with Client(server) as client:
        platform.live.typing_started("c1")
        with anyio.fail_after(5):
            await shows.enough.wait()
        await client.call_tool("send_file", {"chat_id": "c1", "path": "chart.png"})
        typing = platform.live.typing
        assert typing is not None
        showing = typing.showing
    assert showing == frozenset()
    assert files == ["image/png"]
