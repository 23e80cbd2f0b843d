"""The send_file tool: workspace files through the same outbox as text, refused outside the workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import MCPServer

from shared.channelkit import SendFailed, Unreachable, define_channel
from tests.shared.test_channelkit_kit import NOW, KitSettings, Platform, error_text

pytestmark = pytest.mark.anyio


class FilePlatform(Platform):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[tuple[str, Path, str | None, str | None, str, bytes]] = []

    async def send_file(
        self, chat_id: str, path: Path, caption: str | None, reply_to: str | None, mime: str
    ) -> str:
        if chat_id in self.refused:
            raise SendFailed(f"chat {chat_id} does not exist")
        if chat_id not in self.reachable:
            raise Unreachable(f"{chat_id} is offline")
        self.files.append((chat_id, path, caption, reply_to, mime, await anyio.Path(path).read_bytes()))
        return f"f-{len(self.files)}"


def build(
    tmp_path: Path, platform: FilePlatform, *, cap: int | None = None, **settings: Any
) -> MCPServer[Any]:
    return define_channel(
        "kittest",
        settings=KitSettings(state_dir=tmp_path / "state", workspace_dir=tmp_path / "ws", **settings),
        receive=platform.receive,
        send=platform.send,
        send_file=platform.send_file,
        max_file_bytes=cap,
        instructions="test channel",
        clock=lambda: NOW,
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "reports").mkdir(parents=True)
    (root / "reports" / "q3.pdf").write_bytes(b"%PDF-1.7 report")
    return root


async def send_file(client: Client, **arguments: Any) -> types.CallToolResult:
    return await client.call_tool("send_file", arguments)


async def test_a_workspace_file_is_sent_once_with_its_caption_and_type(
    tmp_path: Path, workspace: Path
) -> None:
    platform = FilePlatform()
    arguments = {"chat_id": "c1", "path": "reports/q3.pdf", "caption": "Q3", "idempotency_key": "k1"}
    async with Client(build(tmp_path, platform)) as client:
        first = await send_file(client, reply_to="m7", **arguments)
        again = await send_file(client, **arguments)
        entry = await platform.live.outbox.get(1)
    assert first.structured_content == {
        "status": "sent",
        "message_id": "1",
        "platform_message_id": "f-1",
        "state": "sent",
    }
    assert again.structured_content is not None
    assert again.structured_content["status"] == "duplicate"
    resolved = (workspace / "reports" / "q3.pdf").resolve()
    assert platform.files == [("c1", resolved, "Q3", "m7", "application/pdf", b"%PDF-1.7 report")]
    assert entry is not None
    assert (entry.file_path, entry.text, entry.mime) == (str(resolved), "Q3", "application/pdf")


async def test_a_file_for_an_unreachable_chat_is_queued_in_order_with_text(
    tmp_path: Path, workspace: Path
) -> None:
    platform = FilePlatform()
    async with Client(build(tmp_path, platform)) as client:
        text = await client.call_tool("send_message", {"text": "here it comes", "chat_id": "c2"})
        queued = await send_file(client, chat_id="c2", path="reports/q3.pdf")
        platform.reachable.add("c2")
        delivered = await platform.live.flush("c2")
    assert text.structured_content is not None
    assert queued.structured_content is not None
    assert (text.structured_content["status"], queued.structured_content["status"]) == ("queued", "queued")
    assert delivered == 2
    assert platform.sent == [("c2", "here it comes", None)]
    assert [(chat, caption, mime) for chat, _, caption, _, mime, _ in platform.files] == [
        ("c2", None, "application/pdf")
    ]


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("../outside.txt", "leaves the workspace"),
        ("/etc/hostname", "leaves the workspace"),
        ("escape", "leaves the workspace"),  # a symlink pointing out
        ("reports", "is not a regular file"),
        ("reports/missing.pdf", "does not exist in the workspace"),
        ("big.bin", "more than the 64 this channel sends"),
        ("  ", "is empty"),
    ],
)
async def test_a_path_that_may_not_be_sent_is_refused_with_the_fix(
    tmp_path: Path, workspace: Path, path: str, problem: str
) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    (workspace / "escape").symlink_to(tmp_path / "outside.txt")
    (workspace / "big.bin").write_bytes(b"x" * 65)
    platform = FilePlatform()
    async with Client(build(tmp_path, platform, cap=64)) as client:
        result = await send_file(client, chat_id="c1", path=path)
    assert problem in error_text(result)
    assert platform.files == []


async def test_the_lower_of_the_setting_and_the_platform_cap_applies(tmp_path: Path, workspace: Path) -> None:
    platform = FilePlatform()
    async with Client(build(tmp_path, platform, cap=1000, max_file_bytes=10)) as client:
        result = await send_file(client, chat_id="c1", path="reports/q3.pdf")
    assert "more than the 10 this channel sends" in error_text(result)


async def test_a_file_the_platform_refuses_is_failed_and_reported(tmp_path: Path, workspace: Path) -> None:
    platform = FilePlatform()
    platform.refused.add("nobody")
    async with Client(build(tmp_path, platform)) as client:
        result = await send_file(client, chat_id="nobody", path="reports/q3.pdf")
    assert "file 1 to chat 'nobody' was refused (chat nobody does not exist)" in error_text(result)
    assert "fix the chat_id or the file" in error_text(result)


async def test_a_queued_file_deleted_before_the_flush_fails_instead_of_sending(
    tmp_path: Path, workspace: Path
) -> None:
    platform = FilePlatform()
    gone = (workspace / "reports" / "q3.pdf").resolve()
    async with Client(build(tmp_path, platform)) as client:
        await send_file(client, chat_id="c2", path="reports/q3.pdf")
        (workspace / "reports" / "q3.pdf").unlink()
        platform.reachable.add("c2")
        await platform.live.flush("c2")
        entry = await platform.live.outbox.get(1)
    assert entry is not None
    assert (entry.status, entry.error) == (
        "failed",
        f"the file {gone} is gone from the workspace",
    )


async def test_without_send_file_there_is_no_file_tool(tmp_path: Path) -> None:
    platform = Platform()
    server = define_channel(
        "kittest",
        settings=KitSettings(state_dir=tmp_path),
        receive=platform.receive,
        send=platform.send,
        instructions="test channel",
    )
    async with Client(server) as client:
        tools = await client.list_tools()
    assert [tool.name for tool in tools.tools] == ["send_message"]


def test_the_workspace_comes_from_the_channel_then_nexo_workspace_root_then_the_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NEXO_WORKSPACE_ROOT", raising=False)
    monkeypatch.delenv("NEXO_KITTEST_WORKSPACE_DIR", raising=False)
    assert KitSettings(state_dir=tmp_path).workspace() == tmp_path / "workspace"
    monkeypatch.setenv("NEXO_WORKSPACE_ROOT", str(tmp_path / "shared"))
    assert KitSettings(state_dir=tmp_path).workspace() == tmp_path / "shared"
    monkeypatch.setenv("NEXO_KITTEST_WORKSPACE_DIR", str(tmp_path / "own"))
    assert KitSettings(state_dir=tmp_path).workspace() == tmp_path / "own"
