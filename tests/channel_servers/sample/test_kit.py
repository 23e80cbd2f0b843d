"""The channel contract as a Claude Code-style client sees it: a kit channel and a Claude-Code-only one.

The sample (built on the kit) must work unmodified as a Claude Code channel; the fake in
``tests/fakes/claude_channel.py`` speaks only Claude Code's side of the contract, so the orchestrator
can be tested against a channel nexo did not write.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client import ClientExtension, NotificationBinding
from websockets.asyncio.client import connect

from channel_servers.sample.server import WebChat, build_server
from channel_servers.sample.settings import SampleSettings
from shared import unix_socket
from shared.protocol.events import PullParams, PullRequest, PullResult
from tests.fakes import claude_channel
from tests.fakes.claude_channel import ChannelParams
from tests.mesh.harness import REPO

pytestmark = pytest.mark.anyio


class ClaudeCodeLike(ClientExtension):
    """What Claude Code listens for: only ``notifications/claude/channel``."""

    identifier = "claude/channel"

    def __init__(self) -> None:
        self.messages: list[ChannelParams] = []
        self._arrived = anyio.Event()

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        return [
            NotificationBinding(
                method="notifications/claude/channel", params_type=ChannelParams, handler=self._on
            )
        ]

    async def _on(self, params: ChannelParams) -> None:
        self.messages.append(params)
        self._arrived.set()
        self._arrived = anyio.Event()

    async def wait(self, count: int) -> list[ChannelParams]:
        with anyio.fail_after(10):
            while len({m.model_dump_json() for m in self.messages}) < count:
                await self._arrived.wait()
        return self.messages


async def write_lines(inbox: Path, *lines: str) -> None:
    async with await unix_socket.connect(inbox) as stream:
        await stream.send("".join(line + "\n" for line in lines).encode())


@asynccontextmanager
async def fake(tmp_path: Path) -> AsyncIterator[tuple[Client, ClaudeCodeLike, Path, Path]]:
    inbox, replies = tmp_path / "inbox.sock", tmp_path / "replies.jsonl"
    listener = ClaudeCodeLike()
    server = claude_channel.build_server(inbox, replies)
    async with Client(server, mode="legacy", extensions=[listener]) as client:
        yield client, listener, inbox, replies


async def test_the_fake_declares_only_the_claude_channel_capability(tmp_path: Path) -> None:
    async with fake(tmp_path) as (client, _, _, _):
        capabilities = client.server_capabilities
        info = client.server_info
        tools = (await client.list_tools()).tools
        with pytest.raises(MCPError, match="Method not found"):
            await client.session.send_request(PullRequest(params=PullParams()), PullResult)
    assert (capabilities.experimental, capabilities.extensions) == ({"claude/channel": {}}, None)
    assert [tool.name for tool in tools] == ["reply"]
    assert sorted(tools[0].input_schema["required"]) == ["chat_id", "text"]
    assert info is not None
    assert info.name == "claude-fake"


async def test_each_inbox_line_is_pushed_as_a_claude_channel_notification(tmp_path: Path) -> None:
    async with fake(tmp_path) as (_, listener, inbox, _):
        await write_lines(
            inbox, json.dumps({"content": "hi", "meta": {"chat_id": "42", "user": "ana"}}), "", "plain text"
        )
        messages = await listener.wait(2)
    assert messages == [
        ChannelParams(content="hi", meta={"chat_id": "42", "user": "ana"}),
        ChannelParams(content="plain text", meta={"chat_id": "local", "user": "local", "user_id": "local"}),
    ]


async def test_a_malformed_inbox_line_is_skipped(tmp_path: Path) -> None:
    async with fake(tmp_path) as (_, listener, inbox, _):
        await write_lines(inbox, json.dumps({"content": 5}), "after")
        messages = await listener.wait(1)
    assert messages == [
        ChannelParams(content="after", meta={"chat_id": "local", "user": "local", "user_id": "local"})
    ]


async def test_the_reply_tool_records_each_reply(tmp_path: Path) -> None:
    async with fake(tmp_path) as (client, _, _, replies):
        sent = await client.call_tool("reply", {"chat_id": "42", "text": "hello ü"})
        await client.call_tool("reply", {"chat_id": "7", "text": "second"})
        missing = await client.call_tool("reply", {"chat_id": "42"})
        unknown = await client.call_tool("send_message", {"chat_id": "42", "text": "x"})
    assert (sent.is_error, [getattr(block, "text", None) for block in sent.content]) == (False, ["sent"])
    assert [json.loads(line) for line in replies.read_text(encoding="utf-8").splitlines()] == [
        {"chat_id": "42", "text": "hello ü"},
        {"chat_id": "7", "text": "second"},
    ]
    assert (missing.is_error, unknown.is_error) == (True, True)
    assert getattr(unknown.content[0], "text", "") == "unknown tool 'send_message'; the only tool is 'reply'"


async def test_without_a_replies_file_replies_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    async with Client(claude_channel.build_server(None, None), mode="legacy") as client:
        result = await client.call_tool("reply", {"chat_id": "1", "text": "to stderr"})
    assert result.is_error is False
    assert capsys.readouterr().err == '{"chat_id": "1", "text": "to stderr"}\n'


async def test_the_fake_runs_over_stdio_as_a_third_party_process(tmp_path: Path) -> None:
    inbox, replies = tmp_path / "inbox.sock", tmp_path / "replies.jsonl"
    env = {k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")}
    env.update({"CLAUDE_CHANNEL_INBOX": str(inbox), "CLAUDE_CHANNEL_REPLIES": str(replies)})
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tests.fakes.claude_channel"], env=env, cwd=str(REPO)
    )
    listener = ClaudeCodeLike()
    with anyio.fail_after(60):
        async with Client(params, mode="legacy", extensions=[listener]) as client:
            experimental = client.server_capabilities.experimental
            await write_lines(inbox, "over stdio")
            messages = await listener.wait(1)
            await client.call_tool("reply", {"chat_id": "local", "text": "back"})
    assert experimental == {"claude/channel": {}}
    assert messages == [
        ChannelParams(content="over stdio", meta={"chat_id": "local", "user": "local", "user_id": "local"})
    ]
    assert json.loads(replies.read_text()) == {"chat_id": "local", "text": "back"}


async def test_a_kit_channel_works_unmodified_as_a_claude_code_channel(tmp_path: Path) -> None:
    settings = SampleSettings(state_dir=tmp_path, port=0, token="t")
    web = WebChat(settings)
    listener = ClaudeCodeLike()
    async with Client(build_server(settings, web), mode="legacy", extensions=[listener]) as client:
        experimental = client.server_capabilities.experimental or {}
        url = f"ws://{urlsplit(web.url).netloc}/ws?token=t&chat=tab1"
        async with connect(url) as ws:
            await ws.recv()
            await ws.send(json.dumps({"id": "m1", "text": "from the page"}))
            messages = await listener.wait(1)
    assert "claude/channel" in experimental
    assert {m.model_dump_json() for m in messages} == {
        ChannelParams(
            content="from the page", meta={"chat_id": "tab1", "message_id": "m1", "user_id": "operator"}
        ).model_dump_json()
    }
