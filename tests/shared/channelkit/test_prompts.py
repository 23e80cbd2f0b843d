"""Prompts closed with their outcome, and button presses counted like typed answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.server import MCPServer

from shared.channelkit import PromptClosed, Received, define_channel
from shared.protocol.channel import PermissionRequestParams
from shared.protocol.events import PullParams, PullRequest, PullResult
from shared.protocol.permission_prompts import (
    PermissionClosedCall,
    PermissionClosedParams,
    PermissionClosedResult,
    PermissionRequestAccepted,
    PermissionRequestCall,
)
from tests.shared.test_channelkit_kit import NOW, PROMPT, KitSettings, ManualClock, Platform

pytestmark = pytest.mark.anyio


class Closings:
    def __init__(self) -> None:
        self.seen: list[PromptClosed] = []

    async def __call__(self, closed: PromptClosed) -> None:
        self.seen.append(closed)


def build(tmp_path: Path, platform: Platform, closings: Closings, clock: ManualClock) -> MCPServer[Any]:
    return define_channel(
        "kittest",
        settings=KitSettings(state_dir=tmp_path, approval_ttl_s=60),
        receive=platform.receive,
        send=platform.send,
        prompt=platform.prompt,
        closed=closings,
        instructions="test channel",
        clock=lambda: NOW,
        monotonic=clock,
    )


async def ask(client: Client, prompt: PermissionRequestParams = PROMPT) -> None:
    await client.session.send_request(
        PermissionRequestCall(params=prompt.model_dump(by_alias=True)), PermissionRequestAccepted
    )


async def close(client: Client, **params: Any) -> bool:
    result = await client.session.send_request(
        PermissionClosedCall(params=PermissionClosedParams(**params)), PermissionClosedResult
    )
    return result.closed


async def pull_all(client: Client) -> PullResult:
    return await client.session.send_request(PullRequest(params=PullParams(wait_ms=5000)), PullResult)


async def test_closing_a_prompt_tells_the_platform_how_it_ended_and_who_decided(tmp_path: Path) -> None:
    platform, closings = Platform(), Closings()
    async with Client(build(tmp_path, platform, closings, ManualClock())) as client:
        await ask(client)
        closed = await close(client, request_id="kmpqr", outcome="allowed", decided_by="telegram:12345 (Ana)")
        open_after = platform.live.open_prompts()
    assert closed is True
    assert open_after == []
    assert closings.seen == [PromptClosed("kmpqr", "allowed", "telegram:12345 (Ana)", PROMPT)]


async def test_an_older_host_closing_without_an_outcome_still_reaches_the_platform(tmp_path: Path) -> None:
    platform, closings = Platform(), Closings()
    async with Client(build(tmp_path, platform, closings, ManualClock())) as client:
        await ask(client)
        closed = await client.session.send_request(
            PermissionClosedCall.model_validate(
                {"method": "nexo/channel/permission_closed", "params": {"request_id": "kmpqr"}}
            ),
            PermissionClosedResult,
        )
    assert closed.closed is True
    assert closings.seen == [PromptClosed("kmpqr", None, None, PROMPT)]


def test_an_older_channel_reads_a_close_with_an_outcome_as_a_plain_close() -> None:
    class OlderClosedParams(types.RequestParams):
        request_id: str

    older = OlderClosedParams.model_validate(
        {"request_id": "kmpqr", "outcome": "denied", "decided_by": "console"}
    )
    assert older.request_id == "kmpqr"


async def test_a_prompt_this_channel_never_showed_closes_with_no_params(tmp_path: Path) -> None:
    platform, closings = Platform(), Closings()
    clock = ManualClock()
    async with Client(build(tmp_path, platform, closings, clock)) as client:
        await ask(client)
        clock.now = 61  # expired here before the host settled it
        expired = await close(client, request_id="kmpqr", outcome="expired")
        unknown = await close(client, request_id="zzzzz", outcome="cancelled")
    assert (expired, unknown) == (False, False)
    assert closings.seen == [
        PromptClosed("kmpqr", "expired", None, None),
        PromptClosed("zzzzz", "cancelled", None, None),
    ]


async def test_a_press_counts_like_a_typed_answer_once_per_sender(tmp_path: Path) -> None:
    platform, closings = Platform(), Closings()
    async with Client(build(tmp_path, platform, closings, ManualClock())) as client:
        await ask(client)
        pressed = await platform.live.press("kmpqr", "allow", "u42", "c1", "cb-1", sender_name="Ana")
        pressed_again = await platform.live.press("kmpqr", "deny", "u42", "c1", "cb-2")
        typed_after = await platform.live.inbound("no kmpqr", {"chat_id": "c1", "user_id": "u42"}, "c1:m1")
        other_sender = await platform.live.press("kmpqr", "deny", "u7", "c2", "cb-3")
        pulled = await pull_all(client)
    assert (pressed, pressed_again, typed_after, other_sender) == (
        Received("permission_verdict", 1, True),
        Received("permission_verdict", 1, False),
        Received("permission_verdict", 1, False),
        Received("permission_verdict", 2, True),
    )
    assert [(event.kind, event.dedupe_key, event.payload) for event in pulled.events] == [
        (
            "permission_verdict",
            "permission_verdict:kmpqr:u42",
            {
                "request_id": "kmpqr",
                "behavior": "allow",
                "sender": "u42",
                "chat_id": "c1",
                "sender_name": "Ana",
            },
        ),
        (
            "permission_verdict",
            "permission_verdict:kmpqr:u7",
            {"request_id": "kmpqr", "behavior": "deny", "sender": "u7", "chat_id": "c2"},
        ),
    ]


async def test_a_press_on_a_prompt_that_is_not_open_is_dropped_not_stored(tmp_path: Path) -> None:
    platform, closings = Platform(), Closings()
    clock = ManualClock()
    async with Client(build(tmp_path, platform, closings, clock)) as client:
        never_asked = await platform.live.press("zzzzz", "allow", "u42", "c1", "cb-1")
        await ask(client)
        clock.now = 61
        expired = await platform.live.press("kmpqr", "allow", "u42", "c1", "cb-2")
        marker = await platform.live.inbound("hello", {"chat_id": "c1"}, "c1:m1")
        pulled = await pull_all(client)
    assert (never_asked, expired) == (Received("permission_verdict", 0, False),) * 2
    assert [event.seq for event in pulled.events] == [marker.seq]


async def test_a_press_without_a_sender_or_key_is_refused(tmp_path: Path) -> None:
    platform, closings = Platform(), Closings()
    async with Client(build(tmp_path, platform, closings, ManualClock())) as client:
        await ask(client)
        with pytest.raises(ValueError, match="sender"):
            await platform.live.press("kmpqr", "allow", "", "c1", "cb-1")
        with pytest.raises(ValueError, match="dedupe key"):
            await platform.live.press("kmpqr", "allow", "u42", "c1", "")


def test_closed_without_prompt_is_a_configuration_error(tmp_path: Path) -> None:
    platform = Platform()
    with pytest.raises(ValueError, match="closed= needs prompt="):
        define_channel(
            "kittest",
            settings=KitSettings(state_dir=tmp_path),
            receive=platform.receive,
            send=platform.send,
            closed=Closings(),
            instructions="test channel",
        )
