"""Pushed channel notifications reach each connected client once, however many requests it made."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client import ClientExtension, NotificationBinding
from mcp.server import MCPServer
from pydantic import BaseModel

from orchestrator.mesh.pushed import PushedNotifications
from shared.channelkit.server import LiveSessions, make_channel_server
from shared.events import EventLog
from shared.protocol.channel import ChannelParams, PermissionVerdictParams, channel_method, normalize_inbound
from shared.protocol.policy import READ_ONLY_HINTS

pytestmark = pytest.mark.anyio


class Collect(ClientExtension):
    identifier = "nexo/channel"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.arrived = anyio.Event()

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        def binding(method: str) -> NotificationBinding[Any]:
            async def deliver(params: ChannelParams) -> None:
                self.seen.append((method, params.content))
                if len(self.seen) == 2:
                    self.arrived.set()

            return NotificationBinding(method=method, params_type=ChannelParams, handler=deliver)

        return [binding(channel_method("nexo")), binding(channel_method("claude"))]


def _server() -> tuple[MCPServer[Any], LiveSessions]:
    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        yield None

    def no_log(_: Any) -> EventLog:
        raise AssertionError("not used")

    server, sessions = make_channel_server(
        "pusher", instructions="", lifespan=lifespan, get_log=no_log, event_kinds=("message",)
    )

    @server.tool(title="Ping", annotations=READ_ONLY_HINTS)
    async def ping() -> str:
        """Answer pong: a round trip that lets pushes sent before it arrive."""
        return "pong"

    return server, sessions


async def test_each_client_gets_one_copy_of_each_push_after_many_requests() -> None:
    server, sessions = _server()
    collect = Collect()
    async with Client(server, mode="legacy", extensions=[collect]) as client:
        for _ in range(3):
            await client.call_tool("ping", {})
        reached = await sessions.push_message(normalize_inbound("hello", {"chat_id": "c"}))
        with anyio.fail_after(5):
            await collect.arrived.wait()
        await client.call_tool("ping", {})  # a round trip after the pushes: any extra copy has arrived
    assert (reached, sessions.count) == (1, 1)
    assert sorted(collect.seen) == [
        ("notifications/claude/channel", "hello"),
        ("notifications/nexo/channel", "hello"),
    ]


async def test_a_client_that_pulls_is_not_pushed_to_and_one_that_does_not_gets_both_namespaces() -> None:
    server, sessions = _server()
    pushed = Collect()
    pulled: list[tuple[str, str]] = []

    async def handler(server_name: str, method: str, params: BaseModel) -> None:
        pulled.append((server_name, method))

    # The orchestrator's own extension, claiming what a Claude Code channel pushes.
    pulling = PushedNotifications(
        "pusher", {channel_method(ns): ChannelParams for ns in ("nexo", "claude")}, handler
    )
    async with (
        Client(server, mode="legacy", extensions=[pushed]) as claude_like,
        Client(server, mode="legacy", extensions=[pulling]) as orchestrator_like,
    ):
        await orchestrator_like.call_tool("ping", {})
        reached = await sessions.push_message(normalize_inbound("hello", {"chat_id": "c"}))
        verdicts = await sessions.push_verdict(PermissionVerdictParams(request_id="abcde", behavior="allow"))
        with anyio.fail_after(5):
            await pushed.arrived.wait()
        # A round trip on each after the pushes: anything sent to either has arrived by now.
        await claude_like.call_tool("ping", {})
        await orchestrator_like.call_tool("ping", {})
    assert (reached, verdicts, sessions.count, sessions.pulling) == (1, 1, 1, 1)
    assert sorted(pushed.seen) == [
        ("notifications/claude/channel", "hello"),
        ("notifications/nexo/channel", "hello"),
    ]
    assert pulled == []
