"""The sample channel over a real socket: a WebSocket client plays the browser tab."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from pydantic import ValidationError
from starlette.types import Message
from starlette.websockets import WebSocket
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from channel_servers.sample.server import WebChat, build_server
from channel_servers.sample.settings import SampleSettings
from shared.channelkit import Unreachable
from shared.protocol.channel import PermissionRequestParams
from shared.protocol.events import Event, PullParams, PullRequest, PullResult
from shared.protocol.permission_prompts import (
    PermissionClosedCall,
    PermissionClosedParams,
    PermissionClosedResult,
    PermissionRequestAccepted,
    PermissionRequestCall,
)
from tests.mesh.harness import REPO

pytestmark = pytest.mark.anyio

TOKEN = "t0ken-for-tests"


@asynccontextmanager
async def running(tmp_path: Path, **overrides: Any) -> AsyncIterator[tuple[Client, WebChat]]:
    settings = SampleSettings(state_dir=tmp_path, port=0, token=TOKEN, **overrides)
    web = WebChat(settings)
    async with Client(build_server(settings, web)) as client:
        yield client, web


def socket_url(web: WebChat, chat: str, token: str = TOKEN) -> str:
    return f"ws://{urlsplit(web.url).netloc}/ws?token={token}&chat={chat}"


@asynccontextmanager
async def tab(web: WebChat, chat: str) -> AsyncIterator[ClientConnection]:
    async with connect(socket_url(web, chat)) as ws:
        assert await frame(ws) == {"type": "welcome", "chat_id": chat}
        yield ws


async def frame(ws: ClientConnection) -> dict[str, Any]:
    with anyio.fail_after(5):
        decoded: dict[str, Any] = json.loads(await ws.recv())
    return decoded


async def say(ws: ClientConnection, message_id: str, text: str) -> dict[str, Any]:
    await ws.send(json.dumps({"id": message_id, "text": text}))
    return await frame(ws)


async def pull(client: Client) -> list[Event]:
    request = PullRequest(params=PullParams(wait_ms=5000))
    return (await client.session.send_request(request, PullResult)).events


def reply_frame(received: dict[str, Any], text: str, reply_to: str | None) -> dict[str, Any]:
    return {"type": "reply", "id": received["id"], "text": text, "reply_to": reply_to}


async def test_a_typed_message_becomes_a_durable_event_with_its_chat_and_ids(tmp_path: Path) -> None:
    async with running(tmp_path) as (client, web), tab(web, "tab1") as ws:
        queued = await say(ws, "m1", "hello")
        events = await pull(client)
    assert queued == {"type": "queued", "id": "m1", "seq": 1, "duplicate": False}
    assert [(e.kind, e.dedupe_key, e.payload) for e in events] == [
        (
            "message",
            "tab1:m1",
            {"content": "hello", "meta": {"chat_id": "tab1", "message_id": "m1", "user_id": "operator"}},
        )
    ]


async def test_a_message_the_page_sends_twice_is_stored_once(tmp_path: Path) -> None:
    async with running(tmp_path) as (client, web), tab(web, "tab1") as ws:
        first = await say(ws, "m1", "hello")
        again = await say(ws, "m1", "hello")
        events = await pull(client)
    assert (first["duplicate"], again["duplicate"], again["seq"]) == (False, True, 1)
    assert len(events) == 1


async def test_a_reply_goes_to_the_socket_of_its_chat_only(tmp_path: Path) -> None:
    async with running(tmp_path) as (client, web), tab(web, "tab1") as one, tab(web, "tab2") as two:
        to_two = await client.call_tool(
            "send_message", {"text": "for two", "chat_id": "tab2", "reply_to": "m1"}
        )
        to_one = await client.call_tool("send_message", {"text": "for one", "chat_id": "tab1"})
        got_two = await frame(two)
        got_one = await frame(one)  # the first frame tab1 sees is its own reply, not tab2's
    assert got_two == reply_frame(got_two, "for two", "m1")
    assert got_one == reply_frame(got_one, "for one", None)
    assert to_two.structured_content == {
        "status": "sent",
        "message_id": "1",
        "platform_message_id": got_two["id"],
        "state": "sent",
    }
    assert to_one.structured_content is not None
    assert to_one.structured_content["platform_message_id"] == got_one["id"]


async def test_a_reply_for_a_closed_tab_waits_and_arrives_when_the_tab_reconnects(tmp_path: Path) -> None:
    async with running(tmp_path) as (client, web):
        async with tab(web, "tab1"):
            pass
        queued = await client.call_tool("send_message", {"text": "while away", "chat_id": "tab1"})
        async with tab(web, "tab1") as ws:
            delivered = await frame(ws)
        again = await client.call_tool(
            "send_message", {"text": "while away", "chat_id": "tab1", "idempotency_key": "k"}
        )
        after = await client.call_tool(
            "send_message", {"text": "x", "chat_id": "tab1", "idempotency_key": "k"}
        )
    assert queued.structured_content is not None
    assert (queued.structured_content["status"], queued.structured_content["state"]) == ("queued", "pending")
    assert delivered == reply_frame(delivered, "while away", None)
    assert again.structured_content is not None
    assert again.structured_content["status"] == "queued"
    assert after.structured_content is not None
    assert after.structured_content["status"] == "duplicate"


async def test_a_malformed_frame_gets_an_error_and_the_socket_stays_usable(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, web), tab(web, "tab1") as ws:
        await ws.send(json.dumps({"id": "m1", "text": ""}))
        error = await frame(ws)
        queued = await say(ws, "m2", "fine")
    assert error == {"type": "error", "message": "bad frame: String should have at least 1 character"}
    assert queued == {"type": "queued", "id": "m2", "seq": 1, "duplicate": False}


async def test_a_full_inbox_is_reported_to_the_page(tmp_path: Path) -> None:
    async with running(tmp_path, max_pending=1) as (_, web), tab(web, "tab1") as ws:
        await say(ws, "m1", "one")
        refused = await say(ws, "m2", "two")
    assert refused["type"] == "error"
    assert refused["message"].startswith("1 events are waiting for the orchestrator")


async def test_an_approval_is_shown_in_every_tab_and_answered_from_one(tmp_path: Path) -> None:
    prompt = PermissionRequestParams(
        request_id="kmpqr", tool_name="notes__write_note", description="Append", input_preview="{}"
    )
    async with running(tmp_path) as (client, web), tab(web, "tab1") as ws:
        accepted = await client.session.send_request(
            PermissionRequestCall(params=prompt.model_dump(by_alias=True)), PermissionRequestAccepted
        )
        shown = await frame(ws)
        async with tab(web, "late") as late:
            shown_late = await frame(late)  # a tab that opens while the prompt is open sees it too
        answered = await say(ws, "m1", "yes kmpqr")
        events = await pull(client)
    assert accepted.delivered == 1
    assert shown == {
        "type": "approval",
        "request_id": "kmpqr",
        "tool_name": "notes__write_note",
        "description": "Append",
        "input_preview": "{}",
        "schema": 1,
    }
    assert shown_late == shown
    assert answered == {"type": "verdict", "id": "m1", "seq": 1, "duplicate": False}
    assert [(e.kind, e.payload) for e in events] == [
        (
            "permission_verdict",
            {"request_id": "kmpqr", "behavior": "allow", "sender": "operator", "chat_id": "tab1"},
        )
    ]


async def test_a_settled_approval_is_not_shown_to_a_tab_opened_later_and_a_late_answer_still_reaches_nexo(
    tmp_path: Path,
) -> None:
    prompt = PermissionRequestParams(
        request_id="kmpqr", tool_name="notes__write_note", description="Append", input_preview="{}"
    )
    closing = PermissionClosedCall(params=PermissionClosedParams(request_id="kmpqr"))
    async with running(tmp_path) as (client, web):
        await client.session.send_request(
            PermissionRequestCall(params=prompt.model_dump(by_alias=True)), PermissionRequestAccepted
        )
        first = await client.session.send_request(closing, PermissionClosedResult)
        again = await client.session.send_request(closing, PermissionClosedResult)
        async with tab(web, "late") as late:
            # Nothing is replayed: the first frame is the answer to what the tab says.
            answered = await say(late, "m1", "yes kmpqr")
        events = await pull(client)
    assert (first.closed, again.closed) == (True, False)
    assert answered == {"type": "verdict", "id": "m1", "seq": 1, "duplicate": False}
    assert [(e.kind, e.payload["request_id"]) for e in events] == [("permission_verdict", "kmpqr")]


async def test_the_page_and_the_socket_need_the_token_and_a_local_origin(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, web):
        base = f"http://{urlsplit(web.url).netloc}"
        async with httpx2.AsyncClient() as http:
            without = await http.get(f"{base}/")
            wrong = await http.get(f"{base}/?token=nope")
            page = await http.get(web.url)
        refused = []
        for url, origin in [
            (socket_url(web, "tab1", token="nope"), None),
            (socket_url(web, "dotted.chat"), None),
            (socket_url(web, "tab1"), "http://evil.example"),
        ]:
            with pytest.raises(InvalidStatus) as caught:
                async with connect(url, origin=origin):  # type: ignore[arg-type]
                    pass
            refused.append(caught.value.response.status_code)
    assert (without.status_code, wrong.status_code) == (403, 403)
    assert without.text == "open the URL the sample channel printed on start"
    assert (page.status_code, page.headers["content-type"]) == (200, "text/html; charset=utf-8")
    assert "new WebSocket(" in page.text
    assert refused == [403, 403, 403]


async def test_a_reply_to_a_tab_whose_socket_just_died_is_kept_for_later(tmp_path: Path) -> None:
    async def connect_message() -> Message:
        return {"type": "websocket.connect"}

    async def reset_after_accept(message: Message) -> None:
        if message["type"] != "websocket.accept":
            raise OSError("connection reset by peer")

    web = WebChat(SampleSettings(state_dir=tmp_path, token=TOKEN))
    dying = WebSocket(
        {"type": "websocket", "path": "/ws", "headers": []}, connect_message, reset_after_accept
    )
    await dying.accept()
    web.sockets["tab1"] = {dying}
    with pytest.raises(Unreachable, match="no browser tab of chat 'tab1' is open"):
        await web.send("tab1", "hi", None)
    assert web.sockets == {"tab1": set()}


def test_a_generated_token_is_kept_private_and_reused(tmp_path: Path) -> None:
    first = SampleSettings(state_dir=tmp_path).resolve_token()
    again = SampleSettings(state_dir=tmp_path).resolve_token()
    configured = SampleSettings(state_dir=tmp_path, token="mine").resolve_token()
    path = tmp_path / "sample" / "token"
    assert first == again == path.read_text().strip()
    assert len(first) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert configured == "mine"


def test_the_page_is_served_on_loopback_only(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"loopback only, not '0\.0\.0\.0'"):
        SampleSettings(state_dir=tmp_path, host="0.0.0.0")
    assert SampleSettings(state_dir=tmp_path, host="::1").host == "::1"


def test_without_the_websockets_package_the_server_refuses_to_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "websockets", None)
    with pytest.raises(RuntimeError, match="pip install websockets"):
        build_server(SampleSettings(state_dir=tmp_path))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_the_channel_runs_over_stdio_with_its_page(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")}
    env.update(
        {
            "NEXO_SAMPLE_STATE_DIR": str(tmp_path),
            "NEXO_SAMPLE_PORT": str(port),
            "NEXO_SAMPLE_TOKEN": TOKEN,
            "NEXO_LOG_LEVEL": "WARNING",
        }
    )
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "channel_servers.sample"], env=env, cwd=str(REPO)
    )
    url = f"ws://127.0.0.1:{port}/ws?token={TOKEN}&chat=tab1"
    with anyio.fail_after(60):
        async with Client(params) as client, connect(url) as ws:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            welcome = await frame(ws)
            queued = await say(ws, "m1", "over stdio")
            events = await pull(client)
            await client.call_tool("send_message", {"text": "back", "chat_id": "tab1", "reply_to": "m1"})
            reply = await frame(ws)
    assert tools == ["send_message"]
    assert (welcome["type"], queued["seq"]) == ("welcome", 1)
    assert [e.payload["content"] for e in events] == ["over stdio"]
    assert reply == reply_frame(reply, "back", "m1")
    assert stat.S_IMODE((tmp_path / "sample" / "sample.db").stat().st_mode) == 0o600
