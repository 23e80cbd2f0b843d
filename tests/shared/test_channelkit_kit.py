"""The channel kit through the MCP protocol in memory: events, outbox, recovery, permission relay."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client import ClientExtension, NotificationBinding
from mcp.server import MCPServer
from pydantic import BaseModel
from pydantic_settings import SettingsConfigDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from shared.channelkit import (
    Channel,
    ChannelSettings,
    EventLogFull,
    Received,
    SendFailed,
    Unreachable,
    define_channel,
    serve_asgi,
)
from shared.hosting.errors import HostingError
from shared.protocol.channel import (
    ChannelParams,
    ClaudePermissionRequestNotification,
    PermissionRequestParams,
    PermissionVerdictParams,
)
from shared.protocol.events import (
    AckParams,
    AckRequest,
    AckResult,
    Event,
    PullParams,
    PullRequest,
    PullResult,
)
from shared.protocol.permission_prompts import PermissionRequestAccepted, PermissionRequestCall

pytestmark = pytest.mark.anyio

NOW = 1_700_000_000.0
PROMPT = PermissionRequestParams(
    request_id="kmpqr",
    tool_name="notes__write_note",
    description="Append a note",
    input_preview='{"text":"x"}',
)


class KitSettings(ChannelSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_KITTEST_", extra="forbid")


class Platform:
    """A scripted chat platform: records deliveries, refuses or holds them on demand."""

    def __init__(self) -> None:
        self.channel: Channel | None = None
        self.reachable = {"c1"}
        self.refused: set[str] = set()
        self.broken: set[str] = set()
        self.held: set[str] = set()
        self.release = anyio.Event()
        self.entered = anyio.Event()
        self.sent: list[tuple[str, str, str | None]] = []
        self.prompts: list[PermissionRequestParams] = []
        self.prompted = anyio.Event()

    async def receive(self, channel: Channel) -> None:
        self.channel = channel  # a receive side may return at once: the server keeps serving

    async def send(self, chat_id: str, text: str, reply_to: str | None) -> str:
        self.entered.set()
        if text in self.held:
            await self.release.wait()
        if chat_id in self.refused:
            raise SendFailed(f"chat {chat_id} does not exist")
        if chat_id in self.broken:
            raise ConnectionResetError("connection reset by peer")
        if chat_id not in self.reachable:
            raise Unreachable(f"{chat_id} is offline")
        self.sent.append((chat_id, text, reply_to))
        return f"p-{len(self.sent)}"

    async def prompt(self, params: PermissionRequestParams) -> int:
        self.prompts.append(params)
        self.prompted.set()
        return 1

    @property
    def live(self) -> Channel:
        assert self.channel is not None
        return self.channel


class ManualClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def build(
    tmp_path: Path,
    platform: Platform,
    *,
    relay: bool = False,
    monotonic: ManualClock | None = None,
    **settings: Any,
) -> MCPServer[Any]:
    return define_channel(
        "kittest",
        settings=KitSettings(state_dir=tmp_path, **settings),
        receive=platform.receive,
        send=platform.send,
        prompt=platform.prompt if relay else None,
        instructions="test channel",
        clock=lambda: NOW,
        monotonic=monotonic or ManualClock(),
    )


class Pushed(ClientExtension):
    """Collects every channel notification a server pushes (the SDK drops unclaimed ones)."""

    identifier = "nexo/channel"
    METHODS: ClassVar[dict[str, type[BaseModel]]] = {
        "notifications/nexo/channel": ChannelParams,
        "notifications/claude/channel": ChannelParams,
        "notifications/nexo/channel/permission": PermissionVerdictParams,
        "notifications/claude/channel/permission": PermissionVerdictParams,
    }

    def __init__(self) -> None:
        self.received: list[tuple[str, BaseModel]] = []
        self.changed = anyio.Event()

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        return [self._binding(method, params) for method, params in self.METHODS.items()]

    def _binding(self, method: str, params: type[BaseModel]) -> NotificationBinding[Any]:
        async def handle(value: BaseModel) -> None:
            self.received.append((method, value))
            self.changed.set()
            self.changed = anyio.Event()

        return NotificationBinding(method=method, params_type=params, handler=handle)

    async def wait_for(self, method: str, predicate: Any = lambda _: True) -> None:
        with anyio.fail_after(5):
            while not any(m == method and predicate(v) for m, v in self.received):
                await self.changed.wait()

    def distinct(self) -> set[tuple[str, str]]:
        # Pushes are a latency hint and may repeat; what matters is which ones arrived.
        return {(method, value.model_dump_json()) for method, value in self.received}


async def pull(client: Client) -> PullResult:
    """Events that are already there (wait_ms > 0: the event log's zero-wait pull is broken)."""
    return await client.session.send_request(PullRequest(params=PullParams(wait_ms=5000)), PullResult)


async def ack(client: Client, *seqs: int) -> AckResult:
    return await client.session.send_request(AckRequest(params=AckParams(seqs=list(seqs))), AckResult)


async def send_message(client: Client, **arguments: Any) -> types.CallToolResult:
    return await client.call_tool("send_message", arguments)


def message_event(seq: int, key: str, content: str, meta: dict[str, str]) -> Event:
    return Event(
        seq=seq,
        kind="message",
        dedupe_key=key,
        payload={"content": content, "meta": meta},
        created_at=NOW,
        deliveries=1,
    )


def error_text(result: types.CallToolResult) -> str:
    assert result.is_error
    return " ".join(getattr(block, "text", "") for block in result.content)


# --- inbound ------------------------------------------------------------------------------------


async def test_an_inbound_message_is_stored_pulled_and_then_acknowledged(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        received = await platform.live.inbound("hello", {"chat_id": "c1", "message_id": "m1"}, "c1:m1")
        first = await pull(client)
        acked = await ack(client, 1)
        left = await platform.live.events.pending_count()
    assert received == Received(kind="message", seq=1, new=True)
    assert (first.events, first.pending) == (
        [message_event(1, "c1:m1", "hello", {"chat_id": "c1", "message_id": "m1"})],
        1,
    )
    assert (acked.acked, left) == (1, 0)
    assert (tmp_path / "kittest" / "kittest.db").exists()


async def test_a_redelivered_platform_message_is_stored_once(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        first = await platform.live.inbound("hello", {"chat_id": "c1"}, "c1:m1")
        again = await platform.live.inbound("hello", {"chat_id": "c1"}, "c1:m1")
        pulled = await pull(client)
    assert (first, again) == (Received("message", 1, True), Received("message", 1, False))
    assert pulled.events == [message_event(1, "c1:m1", "hello", {"chat_id": "c1"})]


async def test_meta_outside_the_contract_is_dropped_and_scalars_become_text(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        meta = {"chat_id": 42, "bad-key": "x", "urgent": True, "none": None}
        await platform.live.inbound("hi", meta, "k1")
        pulled = await pull(client)
    assert pulled.events[0].payload == {"content": "hi", "meta": {"chat_id": "42", "urgent": "true"}}


async def test_inbound_without_a_dedupe_key_is_refused(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)):
        with pytest.raises(ValueError, match="dedupe key"):
            await platform.live.inbound("hi", {}, "")


async def test_a_full_event_log_refuses_new_messages_but_not_redeliveries(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform, max_pending=1)):
        await platform.live.inbound("one", {}, "k1")
        again = await platform.live.inbound("one", {}, "k1")
        with pytest.raises(EventLogFull, match="1 events are waiting"):
            await platform.live.inbound("two", {}, "k2")
    assert again == Received("message", 1, False)


async def test_new_messages_are_pushed_to_live_sessions_in_both_namespaces(tmp_path: Path) -> None:
    platform = Platform()
    pushed = Pushed()
    async with Client(build(tmp_path, platform), mode="legacy", extensions=[pushed]) as client:
        await client.list_tools()  # a session is pushed to once it has spoken to the server
        await platform.live.inbound("first", {"chat_id": "c1"}, "k1")
        await platform.live.inbound("first", {"chat_id": "c1"}, "k1")  # a redelivery: stored once, not pushed
        await platform.live.inbound("second", {"chat_id": "c1"}, "k2")
        # Notifications are handled in order: once "third" is in, every copy of the others is too.
        await platform.live.inbound("third", {"chat_id": "c1"}, "k3")
        await pushed.wait_for("notifications/nexo/channel", lambda v: v.content == "third")
    first = ChannelParams(content="first", meta={"chat_id": "c1"}).model_dump_json()
    second = ChannelParams(content="second", meta={"chat_id": "c1"}).model_dump_json()
    assert pushed.distinct() - {(m, v) for m, v in pushed.distinct() if "third" in v} == {
        ("notifications/nexo/channel", first),
        ("notifications/claude/channel", first),
        ("notifications/nexo/channel", second),
        ("notifications/claude/channel", second),
    }
    copies = [getattr(value, "content", None) for _, value in pushed.received]
    assert copies.count("first") == copies.count("second")


# --- outbound -----------------------------------------------------------------------------------


async def test_send_message_delivers_and_records_the_platform_id(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        result = await send_message(client, text="hello", chat_id="c1", reply_to="m1")
    assert result.structured_content == {
        "status": "sent",
        "message_id": "1",
        "platform_message_id": "p-1",
        "state": "sent",
    }
    assert platform.sent == [("c1", "hello", "m1")]


async def test_the_same_idempotency_key_never_sends_twice(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        await send_message(client, text="hello", chat_id="c1", idempotency_key="reply:1")
        again = await send_message(client, text="hello", chat_id="c1", idempotency_key="reply:1")
        other = await send_message(client, text="hello", chat_id="c1")
    assert again.structured_content == {
        "status": "duplicate",
        "message_id": "1",
        "platform_message_id": "p-1",
        "state": "sent",
    }
    assert other.structured_content is not None
    assert other.structured_content["status"] == "sent"
    assert platform.sent == [("c1", "hello", None), ("c1", "hello", None)]


async def test_a_message_for_an_unreachable_chat_waits_until_the_chat_is_flushed(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        queued = await send_message(client, text="later", chat_id="c2", idempotency_key="k")
        still_offline = await platform.live.flush("c2")
        platform.reachable.add("c2")
        delivered = await platform.live.flush("c2")
        nothing_left = await platform.live.flush("c2")
        after = await send_message(client, text="later", chat_id="c2", idempotency_key="k")
    assert queued.structured_content == {
        "status": "queued",
        "message_id": "1",
        "platform_message_id": None,
        "state": "pending",
    }
    assert (still_offline, delivered, nothing_left) == (0, 1, 0)
    assert platform.sent == [("c2", "later", None)]
    assert after.structured_content == {
        "status": "duplicate",
        "message_id": "1",
        "platform_message_id": "p-1",
        "state": "sent",
    }


async def test_a_refused_message_is_failed_and_the_model_is_told_how_to_fix_it(tmp_path: Path) -> None:
    platform = Platform()
    platform.refused.add("nope")
    async with Client(build(tmp_path, platform)) as client:
        result = await send_message(client, text="hi", chat_id="nope", idempotency_key="k")
        again = await send_message(client, text="hi", chat_id="nope", idempotency_key="k")
    assert error_text(result) == (
        "Error executing tool send_message: message 1 to chat 'nope' was refused "
        "(chat nope does not exist); it is recorded as failed and is never retried under the same "
        "idempotency_key: fix the chat_id or the text, then send again with a new idempotency_key "
        "if it still needs to go out"
    )
    assert again.structured_content == {
        "status": "duplicate",
        "message_id": "1",
        "platform_message_id": None,
        "state": "failed",
    }


async def test_an_unexpected_send_error_leaves_the_message_uncertain_not_resent(tmp_path: Path) -> None:
    platform = Platform()
    platform.broken.add("c9")
    async with Client(build(tmp_path, platform)) as client:
        result = await send_message(client, text="hi", chat_id="c9", idempotency_key="k")
        again = await send_message(client, text="hi", chat_id="c9", idempotency_key="k")
    assert "may or may not have been delivered" in error_text(result)
    assert "check whether it arrived" in error_text(result)
    assert again.structured_content is not None
    assert (again.structured_content["status"], again.structured_content["state"]) == (
        "duplicate",
        "uncertain",
    )


async def test_two_flushes_of_one_chat_deliver_each_message_once_and_in_order(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        await send_message(client, text="first", chat_id="c2")
        await send_message(client, text="second", chat_id="c2")
        platform.reachable.add("c2")
        platform.held.add("first")
        results: list[int] = []
        async with anyio.create_task_group() as tg:

            async def flush() -> None:
                results.append(await platform.live.flush("c2"))

            tg.start_soon(flush)
            with anyio.fail_after(5):
                await platform.entered.wait()
            tg.start_soon(flush)  # waits for the first flush: "second" never overtakes "first"
            await anyio.wait_all_tasks_blocked()
            platform.release.set()
    assert results == [2, 0]
    assert platform.sent == [("c2", "first", None), ("c2", "second", None)]


async def test_a_queued_message_the_platform_then_refuses_is_failed_on_flush(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        await send_message(client, text="hi", chat_id="c3", idempotency_key="k")
        platform.refused.add("c3")
        delivered = await platform.live.flush("c3")
        again = await send_message(client, text="hi", chat_id="c3", idempotency_key="k")
    assert delivered == 0
    assert again.structured_content is not None
    assert again.structured_content["state"] == "failed"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"text": "hi", "chat_id": " "},
            "Error executing tool send_message: chat_id ' ' is empty; "
            "pass the chat_id from the <channel ...> tag",
        ),
        (
            {"text": "", "chat_id": "c1"},
            "Error executing tool send_message: text '' is empty; write the message to send",
        ),
    ],
)
async def test_an_empty_chat_id_or_text_is_an_error_the_model_can_fix(
    tmp_path: Path, arguments: dict[str, str], expected: str
) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        result = await client.call_tool("send_message", arguments)
    assert error_text(result) == expected
    assert platform.sent == []


# --- the contract as advertised -----------------------------------------------------------------


async def test_the_outbound_tool_name_is_configurable_not_read_only_and_not_idempotent(
    tmp_path: Path,
) -> None:
    platform = Platform()
    server = define_channel(
        "kittest",
        settings=KitSettings(state_dir=tmp_path),
        receive=platform.receive,
        send=platform.send,
        instructions="test channel",
        outbound_tool="post",
    )
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        extensions = client.server_capabilities.extensions or {}
    assert [tool.name for tool in tools] == ["post"]
    assert tools[0].annotations is not None
    # Only a call that carries an idempotency_key is safe to repeat.
    assert (tools[0].annotations.read_only_hint, tools[0].annotations.idempotent_hint) == (False, False)
    assert sorted(tools[0].input_schema["properties"]) == [
        "chat_id",
        "idempotency_key",
        "notice",
        "reply_to",
        "text",
    ]
    assert extensions["nexo/channel"] == {"outbound_tool": "post", "permission": False}


async def test_the_channel_capabilities_are_declared_in_the_handshake(tmp_path: Path) -> None:
    async with Client(build(tmp_path, Platform()), mode="legacy") as plain:
        without = plain.server_capabilities.experimental or {}
    async with Client(build(tmp_path, Platform(), relay=True), mode="legacy") as relaying:
        with_relay = relaying.server_capabilities.experimental or {}
    assert sorted(without) == ["claude/channel", "nexo/channel", "nexo/events", "nexo/lane"]
    assert without["nexo/events"]["kinds"] == ["message"]
    assert "nexo/events/pull" in without["nexo/lane"]["methods"]
    assert sorted(with_relay) == [
        "claude/channel",
        "claude/channel/permission",
        "nexo/channel",
        "nexo/channel/permission",
        "nexo/events",
        "nexo/lane",
    ]
    assert with_relay["nexo/events"]["kinds"] == ["message", "permission_verdict"]


# --- permission relay ---------------------------------------------------------------------------


async def test_a_permission_prompt_and_its_answer_travel_the_whole_relay(tmp_path: Path) -> None:
    platform = Platform()
    pushed = Pushed()
    async with Client(build(tmp_path, platform, relay=True), mode="legacy", extensions=[pushed]) as client:
        accepted = await client.session.send_request(
            PermissionRequestCall(params=PROMPT.model_dump(by_alias=True)), PermissionRequestAccepted
        )
        shown = platform.live.open_prompts()
        answered = await platform.live.inbound("yes kmpqr", {"chat_id": "c1", "user_id": "u42"}, "c1:m9")
        await pushed.wait_for("notifications/claude/channel/permission")
        pulled = await pull(client)
        notified = pushed.distinct()
        again = await platform.live.inbound("no kmpqr", {"chat_id": "c1", "user_id": "u42"}, "c1:m10")
    assert accepted.delivered == 1
    assert (platform.prompts, shown) == ([PROMPT], [PROMPT])
    assert answered == Received(kind="permission_verdict", seq=1, new=True)
    assert [(e.kind, e.dedupe_key, e.payload) for e in pulled.events] == [
        (
            "permission_verdict",
            "permission_verdict:kmpqr:u42",
            # who answered (for approvers) and in which chat (to say so when it does not count)
            {"request_id": "kmpqr", "behavior": "allow", "sender": "u42", "chat_id": "c1"},
        )
    ]
    verdict = PermissionVerdictParams(request_id="kmpqr", behavior="allow").model_dump_json()
    assert notified == {
        ("notifications/nexo/channel/permission", verdict),
        ("notifications/claude/channel/permission", verdict),
    }
    assert again == Received(kind="permission_verdict", seq=1, new=False)  # one answer per sender


async def test_a_refused_senders_answer_leaves_the_prompt_answerable_by_the_operator(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform, relay=True)) as client:
        await client.session.send_request(
            PermissionRequestCall(params=PROMPT.model_dump(by_alias=True)), PermissionRequestAccepted
        )
        contact = await platform.live.inbound("yes kmpqr", {"chat_id": "c2", "user_id": "contact-7"}, "c2:m1")
        still_open = platform.live.open_prompts()
        owner = await platform.live.inbound("yes kmpqr", {"chat_id": "c1", "user_id": "owner-1"}, "c1:m1")
        pulled = await pull(client)
    assert (contact, still_open, owner) == (
        Received(kind="permission_verdict", seq=1, new=True),
        [PROMPT],
        Received(kind="permission_verdict", seq=2, new=True),
    )
    assert [(e.dedupe_key, e.payload["sender"]) for e in pulled.events] == [
        ("permission_verdict:kmpqr:contact-7", "contact-7"),
        ("permission_verdict:kmpqr:owner-1", "owner-1"),
    ]


async def test_an_answer_after_the_prompt_expired_is_an_ordinary_message(tmp_path: Path) -> None:
    platform = Platform()
    clock = ManualClock()
    async with Client(build(tmp_path, platform, relay=True, monotonic=clock, approval_ttl_s=60)) as client:
        await client.session.send_request(
            PermissionRequestCall(params=PROMPT.model_dump(by_alias=True)), PermissionRequestAccepted
        )
        clock.now = 61
        received = await platform.live.inbound("no kmpqr", {"chat_id": "c1"}, "c1:m1")
    assert received == Received(kind="message", seq=1, new=True)


async def test_claude_codes_permission_request_notification_reaches_the_prompt(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform, relay=True), mode="legacy") as client:
        note = ClaudePermissionRequestNotification(params=PROMPT)
        await client.session.send_notification(note)  # type: ignore[arg-type]
        with anyio.fail_after(5):
            await platform.prompted.wait()
    assert platform.prompts == [PROMPT]


async def test_without_a_prompt_callback_there_is_no_relay(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        with pytest.raises(MCPError, match="Method not found"):
            await client.session.send_request(
                PermissionRequestCall(params=PROMPT.model_dump(by_alias=True)), PermissionRequestAccepted
            )
        received = await platform.live.inbound("yes kmpqr", {}, "k1")
    assert received == Received(kind="message", seq=1, new=True)


# --- start-up -----------------------------------------------------------------------------------


async def test_with_wait_until_ready_the_server_serves_only_once_receive_is_ready(tmp_path: Path) -> None:
    order: list[str] = []
    go = anyio.Event()

    async def receive(channel: Channel) -> None:
        await go.wait()
        order.append("ready")
        channel.ready()
        channel.ready()  # a second call changes nothing

    async def send(chat_id: str, text: str, reply_to: str | None) -> str:
        raise AssertionError("not called")

    server = define_channel(
        "kittest",
        settings=KitSettings(state_dir=tmp_path),
        receive=receive,
        send=send,
        instructions="",
        wait_until_ready=True,
    )

    async def connect() -> None:
        async with Client(server):
            order.append("connected")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(connect)
            await anyio.wait_all_tasks_blocked()
            order.append("released")
            go.set()
    assert order == ["released", "ready", "connected"]


async def test_a_receive_side_that_cannot_start_fails_the_server_start(tmp_path: Path) -> None:
    async def receive(channel: Channel) -> None:
        raise OSError("cannot listen on 127.0.0.1:1 (Permission denied)")

    async def send(chat_id: str, text: str, reply_to: str | None) -> str:
        raise AssertionError("not called")

    server = define_channel(
        "kittest",
        settings=KitSettings(state_dir=tmp_path),
        receive=receive,
        send=send,
        instructions="",
        wait_until_ready=True,
    )
    with pytest.RaisesGroup(pytest.RaisesExc(OSError, match="Permission denied"), flatten_subgroups=True):
        async with Client(server):
            pass


# --- settings -----------------------------------------------------------------------------------


def test_the_state_dir_comes_from_the_channels_own_variable_then_nexo_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEXO_STATE_DIR", str(tmp_path / "shared"))
    shared = KitSettings()
    monkeypatch.setenv("NEXO_KITTEST_STATE_DIR", str(tmp_path / "own"))
    own = KitSettings()
    monkeypatch.setenv("NEXO_KITTEST_DB_PATH", str(tmp_path / "elsewhere.db"))
    pinned = KitSettings()
    assert shared.database("kittest") == tmp_path / "shared" / "kittest" / "kittest.db"
    assert own.database("kittest") == tmp_path / "own" / "kittest" / "kittest.db"
    assert pinned.database("kittest") == tmp_path / "elsewhere.db"


def test_without_any_variable_the_state_dir_is_under_the_home_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NEXO_STATE_DIR", raising=False)
    monkeypatch.setenv("HOME", "/home/someone")
    assert KitSettings().database("x") == Path("/home/someone/.local/state/nexo/x/x.db")


# --- serving a receive side's web app -----------------------------------------------------------


async def test_serve_asgi_reports_the_bound_port_and_stops_when_cancelled() -> None:
    async def hello(_: Request) -> PlainTextResponse:
        return PlainTextResponse("hello")

    bound: list[int] = []
    ready = anyio.Event()

    async def on_ready(host: str, port: int) -> None:
        bound.append(port)
        ready.set()

    app = Starlette(routes=[Route("/", hello)])
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: serve_asgi(app, "127.0.0.1", 0, on_ready=on_ready))
            await ready.wait()
            async with httpx2.AsyncClient() as http:
                response = await http.get(f"http://127.0.0.1:{bound[0]}/")
            tg.cancel_scope.cancel()
    assert (response.status_code, response.text) == (200, "hello")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", bound[0]))  # released after the stop


async def test_serve_asgi_on_a_port_in_use_fails_with_a_hint() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(HostingError) as refused:
            await serve_asgi(Starlette(), "127.0.0.1", port, setting="NEXO_X_PORT")
    assert str(refused.value) == (
        f"cannot listen on 127.0.0.1:{port}: Address already in use; another process already listens "
        f"there (see it with `ss -ltnp 'sport = :{port}'`); stop it, or choose another port with NEXO_X_PORT"
    )
