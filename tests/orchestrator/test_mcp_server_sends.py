"""``channel_send`` and ``cron_create`` of ``nexo mcp-server --tier act`` against a daemon in this process.

The MCP client is the SDK's, in memory; the daemon is a real orchestrator with its inbox channel,
audit and cron servers over stdio, reached through its real control socket.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import CallToolResult, Implementation, TextContent

from orchestrator.config.loading import load
from orchestrator.daemon.orchestrator import Orchestrator
from orchestrator.mcpserver.backend import Backend
from orchestrator.mcpserver.server import build_server
from orchestrator.sockets import control_path
from shared.protocol import cron, pairing
from shared.protocol.audit import methods as audit_methods
from shared.protocol.audit.entries import Entry, EntryDraft
from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, Step
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.harness import python_server, write_config
from tests.mesh.inbox import inbox_server, replies
from tests.orchestrator.daemon_support import daemon_in_process

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]
WAIT_S = 60.0
CLIENT = Implementation(name="Claude Desktop", version="1.0")
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _model(request: RecordedRequest) -> ModelReply | Step:
    text = request.last_user_text or ""
    if "[scheduled" in text:
        return ModelReply("backups: all 3 fine")
    if "schedule a backup check" in text and request.body["messages"][-1]["role"] != "tool":
        # A write: the operator is asked, and this test never answers.
        return Step(tool_calls=(CallTool("cron__cron_create", {"schedule": "every 6h", "prompt": "check"}),))
    return ModelReply("ok")


@asynccontextmanager
async def _daemon(tmp_path: Path, llm_url: str) -> AsyncIterator[Orchestrator]:
    config_path = write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={
            "inbox": inbox_server(tmp_path),
            "audit": python_server("servers.audit"),
            "cron": python_server("servers.cron"),
            "pairing": python_server("servers.pairing"),
        },
        agent={"channels": ["inbox"], "history_turns": 0},
        # The goal left waiting for an approval is cancelled at once when the test ends.
        extra={"operator": {"channel": "inbox", "chat_id": "op"}, "shutdown_drain_s": 0},
    )
    orch = Orchestrator(load(config_path), config_label=str(config_path))
    async with daemon_in_process(orch, WAIT_S):
        yield orch


def _text(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


def _client(orch: Orchestrator) -> Client:
    config = orch.config
    server = build_server(config, Backend(config, control_path(config.state_path)), "act")
    return Client(server, client_info=CLIENT)


async def _ledger(orch: Orchestrator, kind: str) -> list[Entry]:
    assert await orch.sink.flush(30)
    tail = await orch.mesh[orch.config.audit.server].request(
        audit_methods.TailRequest(params=audit_methods.TailParams(kind=kind, limit=50)),
        audit_methods.TailResult,
        timeout=30,
    )
    return tail.entries


async def test_a_client_send_passes_the_outbound_guard_once_per_key_never_answers_an_approval_and_is_audited(
    tmp_path: Path,
) -> None:
    with FakeLLM(default=_model) as llm:
        async with _daemon(tmp_path, llm.openai_base_url) as orch, _client(orch) as client:
            asked = anyio.Event()
            record = orch.sink.record
            requested: list[str] = []

            def noting(draft: EntryDraft) -> Any:
                if draft.kind == "approval_requested":
                    requested.append(str(draft.body["request_id"]))
                    asked.set()
                return record(draft)

            orch.sink.record = noting  # type: ignore[method-assign]
            with anyio.fail_after(WAIT_S):
                # A goal of this client waits for the operator; the client cannot answer it for them.
                await client.call_tool("goal_run", {"prompt": "schedule a backup check", "background": True})
                await asked.wait()
                self_approval = await client.call_tool(
                    "channel_send", {"server": "inbox", "chat_id": "op", "text": f"yes {requested[0]}"}
                )
                to_operator = {"server": "inbox", "chat_id": "op", "text": "hello", "idempotency_key": "k1"}
                first = await client.call_tool("channel_send", to_operator)
                retried = await client.call_tool("channel_send", to_operator)
                # "operator" is an owner id of the inbox (pairing.allow_from): a chat the agent may reach.
                scrubbed = await client.call_tool(
                    "channel_send", {"server": "inbox", "chat_id": "operator", "text": f"token {SECRET}"}
                )
                stranger = await client.call_tool(
                    "channel_send", {"server": "inbox", "chat_id": "stranger", "text": "hi"}
                )
                unbound = await client.call_tool(
                    "channel_send", {"server": "telegram", "chat_id": "op2", "text": "hi"}
                )
                entries = await _ledger(orch, "tool_call")
    assert self_approval.is_error is True
    assert f"the message names {requested[0]!r}, a request waiting for the operator's answer" in _text(
        self_approval
    )
    assert (first.is_error, retried.is_error, scrubbed.is_error) == (False, False, False)
    assert first.structured_content == {
        "sent": True,
        "agent": "nexo",
        "server": "inbox",
        "chat_id": "op",
        "idempotency_key": "k1",
        "redacted": False,
    }
    assert scrubbed.structured_content is not None
    assert scrubbed.structured_content["redacted"] is True
    sent = [(r["chat_id"], r["text"]) for r in replies(tmp_path) if "text" in r]
    assert sent == [("op", "hello"), ("operator", "token [REDACTED:github-pat]")]
    assert stranger.is_error is True
    refusal = _text(stranger).removeprefix("Error executing tool channel_send: ")
    assert refusal == (
        "not sent: 'stranger' on inbox is not a chat the agent may reach unasked: it is neither the "
        "operator's chat (inbox:op), nor a sender paired on inbox (`nexo pair list`), nor in "
        "permissions.outbound_allowlist.inbox; pair the contact or add the chat to the allowlist"
    )
    assert unbound.is_error is True
    assert "agent nexo is not bound to a channel 'telegram'; its channels: inbox" in _text(unbound)
    calls = [
        (e.source, e.agent, e.body["tool"], e.body["outcome"], e.body.get("error"))
        for e in entries
        if e.source.startswith("mcp-server")
    ]
    assert calls[0][:4] == ("mcp-server:Claude-Desktop", "nexo", "channel_send", "denied")
    assert calls[1:] == [
        ("mcp-server:Claude-Desktop", "nexo", "channel_send", "ok", None),
        ("mcp-server:Claude-Desktop", "nexo", "channel_send", "ok", None),
        ("mcp-server:Claude-Desktop", "nexo", "channel_send", "ok", None),
        ("mcp-server:Claude-Desktop", "nexo", "channel_send", "denied", refusal.removeprefix("not sent: ")),
        (
            "mcp-server:Claude-Desktop",
            "nexo",
            "channel_send",
            "denied",
            "agent nexo is not bound to a channel 'telegram'; its channels: inbox",
        ),
    ]


async def test_a_client_cron_entry_is_bound_to_the_agent_and_its_fire_answers_into_the_chat_it_named(
    tmp_path: Path,
) -> None:
    with FakeLLM(default=_model) as llm:
        async with _daemon(tmp_path, llm.openai_base_url) as orch, _client(orch) as client:
            concluded = anyio.Event()
            record = orch.sink.record

            def noting(draft: EntryDraft) -> Any:
                if draft.kind == "cron_fire":
                    concluded.set()
                return record(draft)

            orch.sink.record = noting  # type: ignore[method-assign]
            with anyio.fail_after(WAIT_S):
                # alice is a contact paired on the inbox: a chat the agent may reach unasked.
                seed = pairing.SeedParams(channel="inbox", senders=["alice"], by="cli")
                await orch.mesh["pairing"].request(
                    pairing.SeedRequest(params=seed), pairing.SeedResult, timeout=30
                )
                created = await client.call_tool(
                    "cron_create",
                    {
                        "schedule": "every 6h",
                        "prompt": "check the backups",
                        "channel": "inbox",
                        "recipient": "alice",
                    },
                )
                refused = await client.call_tool(
                    "cron_create",
                    {"schedule": "every 6h", "prompt": "x", "channel": "inbox", "recipient": "stranger"},
                )
                assert created.structured_content is not None, created.content
                entry = created.structured_content["entry"]
                await orch.mesh["cron"].request(
                    cron.FireRequest(params=cron.FireParams(id=entry["id"])), cron.FireResult, timeout=30
                )
                await concluded.wait()
                calls = await _ledger(orch, "tool_call")
    assert (entry["binding"], entry["agent"], entry["kind"], entry["channel"], entry["recipient"]) == (
        "nexo",
        "nexo",
        "prompt",
        "inbox",
        "alice",
    )
    assert (entry["provider"], entry["model"], entry["state"]) == ("fake", "scripted", "active")
    assert [(r["chat_id"], r["text"]) for r in replies(tmp_path) if "text" in r] == [
        ("alice", "backups: all 3 fine")
    ]
    assert refused.is_error is True
    assert _text(refused).startswith(
        "Error executing tool cron_create: not scheduled: 'stranger' on inbox is not a chat"
    )
    assert [(e.source, e.body["tool"], e.body["outcome"]) for e in calls] == [
        ("mcp-server:Claude-Desktop", "cron_create", "ok"),
        ("mcp-server:Claude-Desktop", "cron_create", "denied"),
    ]
