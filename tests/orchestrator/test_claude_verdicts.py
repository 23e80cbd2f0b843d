"""Verdicts in Claude Code's contract name nobody: without the operator's say-so they never count,
and every one is logged and recorded; answers go out as the channel's quote policy says."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
import yaml

from orchestrator.config.loading import load
from orchestrator.config.nexo import NexoConfig
from orchestrator.goals import AuditSink
from orchestrator.intake.claude_approvals import ClaudeApprovals
from orchestrator.intake.notices import Notices
from orchestrator.intake.outbound import ReplySender
from orchestrator.mesh import CatalogTool, Mesh, ServerConnection
from orchestrator.permissions import ApprovalBroker
from shared.protocol.channel import PermissionVerdictParams
from shared.protocol.permission_prompts import PermissionRequestAccepted

pytestmark = pytest.mark.anyio
TOOL = CatalogTool("notes", "write", "notes__write", "Write a note", {}, read_only=False, destructive=False)


def _config(tmp_path: Path, **options: Any) -> NexoConfig:
    document = {
        "servers": {"tg": {"transport": "stdio", "command": "bun"}},
        "llm": {"providers": {"p": {"kind": "openai_compat", "base_url": "http://h/v1", "model": "m"}}},
        "agents": [{"id": "nexo", "model": {"provider": "p"}, "channels": ["tg"]}],
        "channels": {"enabled": True, "approved": [{"server": "tg"}]},
        "channel_options": {"tg": options},
    }
    path = tmp_path / "agents.yaml"
    path.write_text(yaml.safe_dump(document))
    return load(path, env={})


class Relay:
    name = "tg"

    def __init__(self) -> None:
        self.shown = anyio.Event()

    async def request(self, request: Any, result_type: type, *, timeout: float) -> PermissionRequestAccepted:
        self.shown.set()
        return PermissionRequestAccepted(delivered=1)


async def test_a_verdict_from_a_plugin_without_the_relay_setting_is_refused_and_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path)
    mesh = Mesh(config.servers)
    sink = AuditSink(mesh["tg"])
    broker = ApprovalBroker(timeout_s=30)
    approvals = ClaudeApprovals(config, mesh, ["tg"], broker, Notices(config, mesh, "nexo", sink))
    relay = Relay()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(broker.ask, TOOL, {"text": "x"}, "call-1", [cast(ServerConnection, relay)])
            await relay.shown.wait()
            (request_id,) = broker.open_requests
            with caplog.at_level(logging.INFO, logger="nexo.approvals"):
                await approvals.verdict(
                    "tg", PermissionVerdictParams(request_id=request_id, behavior="allow")
                )
            assert broker.open_requests == [request_id]
            tg.cancel_scope.cancel()
    assert approvals.relays() == []
    # The refused answer is recorded, and so is telling the operator (failed: no console here).
    assert [(draft.kind, draft.body.get("status")) for draft in sink._queue] == [
        ("notice", None),
        ("channel", "failed"),
    ]
    assert [r.getMessage() for r in caplog.records if r.name == "nexo.approvals"] == [
        f"approval answer {request_id} (allow) from tg in Claude Code's contract",
        f"approval answer {request_id} (allow) from tg refused: channel_options.tg.claude_permission_relay "
        "is off, so answers from tg (which name nobody) do not count; set it to true only if everyone tg "
        "lets answer is the operator",
    ]


def _plugin_meta(chat: str) -> dict[str, str]:
    return {"chat_id": chat, "message_id": "7", "user": "ann", "user_id": "42"}


@pytest.mark.parametrize(
    ("quote", "dm", "group"),
    [(None, None, "7"), ("always", "7", "7"), ("never", None, None), ("groups", None, "7")],
)
async def test_a_claude_channel_quotes_the_message_answered_only_as_its_quote_policy_says(
    tmp_path: Path, quote: Any, dm: str | None, group: str | None
) -> None:
    connection = Mesh(_config(tmp_path).servers)["tg"]  # not connected: no nexo contract declared
    sender = ReplySender(connection, "reply", quote=quote)
    quoted = [
        _plugin_meta(chat)["message_id"] if sender.quotes(_plugin_meta(chat)) else None
        for chat in ("42", "-1001")
    ]
    assert quoted == [dm, group]


class NexoChannel:
    """A connected nexo channel as the verdict handler sees it: it declares nexo's permission relay."""

    name = "console"

    def has_capability(self, name: str) -> bool:
        return name in {
            "nexo/channel",
            "nexo/channel/permission",
            "claude/channel",
            "claude/channel/permission",
        }


async def test_a_nexo_channels_pushed_verdict_is_left_to_its_event_which_names_the_sender(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path)
    mesh = cast(Mesh, {"console": NexoChannel()})
    sink = AuditSink(cast(ServerConnection, NexoChannel()))
    broker = ApprovalBroker(timeout_s=30)
    approvals = ClaudeApprovals(config, mesh, ["console"], broker, Notices(config, mesh, "nexo", sink))
    relay = Relay()
    relay.name = "console"
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(broker.ask, TOOL, {"text": "x"}, "call-1", [cast(ServerConnection, relay)])
            await relay.shown.wait()
            (request_id,) = broker.open_requests
            with caplog.at_level(logging.INFO):
                await approvals.verdict(
                    "console", PermissionVerdictParams(request_id=request_id, behavior="allow")
                )
            assert broker.open_requests == [request_id]
            tg.cancel_scope.cancel()
    assert (sink.pending, caplog.records) == (0, [])


class ClaudePlugin:
    """A connected Claude Code channel plugin as the relay sees it: Claude Code's contract only."""

    name = "tg"

    def has_capability(self, name: str) -> bool:
        return name in {"claude/channel", "claude/channel/permission"}


async def test_with_nobody_to_ask_the_deny_names_the_plugin_left_out_and_the_setting(tmp_path: Path) -> None:
    config = _config(tmp_path)
    mesh = cast(Mesh, {"tg": ClaudePlugin()})
    broker = ApprovalBroker(timeout_s=30)
    approvals = ClaudeApprovals(config, mesh, ["tg"], broker, Notices(config, mesh, "nexo", AuditSink(None)))
    broker.unreached = approvals.unreached
    with anyio.fail_after(5):
        decision = await broker.ask(TOOL, {"text": "x"}, "call-1", approvals.relays())
    assert not decision.allowed
    assert decision.reason == (
        "notes__write needs approval and no operator is connected (open `nexo chat`); tg is a Claude Code "
        "channel and channel_options.tg.claude_permission_relay is off (see `nexo channel doctor`)"
    )
