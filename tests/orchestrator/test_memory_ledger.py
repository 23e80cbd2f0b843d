"""What the memory server does on the orchestrator's behalf reaches the ledger and the metrics:
promotions by consolidation, and memories stored by post-turn extraction.

The memory and audit servers are the real ones over in-memory MCP transports, with real SQLite
files; only the model is a fake (speaking the OpenAI wire format)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from mcp import Client

from orchestrator.config.agents import AgentConfig
from orchestrator.goals.observer import LedgerObserver
from orchestrator.goals.sink import AuditSink
from orchestrator.goals.tracker import GoalTracker, TrackedGoal
from orchestrator.intake.sessions import SessionHistory
from orchestrator.llm import Usage
from orchestrator.loop.extract import remember_from_turn
from orchestrator.loop.goal import GoalResult, Outcome
from orchestrator.mesh import ServerConnection
from orchestrator.metrics import Metrics
from servers.audit.server import build_server as build_audit
from servers.audit.settings import AuditSettings
from servers.memory.embeddings import Embedder
from servers.memory.server import build_server as build_memory
from servers.memory.settings import MemorySettings
from shared.protocol.audit.entries import Entry
from shared.protocol.audit.goals import Origin
from shared.protocol.audit.methods import TailParams, TailRequest, TailResult
from shared.protocol.memory.meta import tool_meta
from tests.fakes.llm import FakeLLM, Reply
from tests.orchestrator.llm.support import VirtualTime, openai
from tests.servers.memory.conftest import Clock
from tests.servers.memory.conftest import embedder as embedder

pytestmark = pytest.mark.anyio


class InMemoryServer:
    """A server reached through the SDK client in memory, with the calls the orchestrator makes."""

    def __init__(self, name: str, client: Client) -> None:
        self.name = name
        self.client = client

    async def request(
        self, request: types.Request[Any, Any], result_type: type[Any], *, timeout: float
    ) -> Any:
        with anyio.fail_after(timeout):
            return await self.client.session.send_request(request, result_type)

    async def call_tool(
        self, tool: str, arguments: Mapping[str, Any], *, meta: Mapping[str, Any] | None = None
    ) -> types.CallToolResult:
        sent = cast(types.RequestParamsMeta, dict(meta)) if meta else None
        return await self.client.call_tool(tool, dict(arguments), meta=sent)


@asynccontextmanager
async def servers(tmp_path: Path, embedder: Embedder, **memory: Any) -> AsyncIterator[tuple[Any, Any]]:
    settings = MemorySettings.model_validate({"state_dir": tmp_path / "memory", **memory})
    audit = AuditSettings(state_dir=tmp_path / "audit", trim_interval_s=0)
    async with (
        Client(build_memory(settings, embedder=embedder, clock=Clock())) as memory_client,
        Client(build_audit(audit)) as audit_client,
    ):
        yield InMemoryServer("memory", memory_client), InMemoryServer("audit", audit_client)


async def ledger(audit: Any, sink: AuditSink, kind: str) -> list[Entry]:
    assert await sink.flush(10)
    tail = await audit.request(TailRequest(params=TailParams(kind=kind)), TailResult, timeout=10)
    return list(tail.entries)


async def test_each_memory_consolidation_promotes_is_a_memory_promotion_entry(
    tmp_path: Path, embedder: Embedder
) -> None:
    consolidation = {"every_assistant_turns": 1, "promote_threshold": 0.5}
    async with servers(tmp_path, embedder, consolidation=consolidation) as (memory, audit):
        stored = await memory.client.call_tool(
            "memory_remember",
            {"content": "Ana is allergic to peanuts", "importance": 1.0},
            meta=tool_meta("nexo", "owner"),
        )
        memory_id = cast(dict[str, Any], stored.structured_content)["id"]
        sink = AuditSink(cast(ServerConnection, audit))
        sessions = SessionHistory("nexo", 10, cast(ServerConnection, memory), sink=sink)
        async with anyio.create_task_group() as tg:
            tg.start_soon(sink.run)
            await sessions.record("console|chat_id=op", "what should I cook?", "No peanuts.", turn_id="t1")
            entries = await ledger(audit, sink, "memory_promotion")
            tg.cancel_scope.cancel()
    assert [(e.source, e.agent, e.subject, e.body) for e in entries] == [
        (
            "server:memory",
            "nexo",
            f"memory {memory_id}",
            {
                "memory_id": str(memory_id),
                "tier": "memory_md",
                "reason": f"consolidate: memory {memory_id} (warmth 1.00)",
            },
        )
    ]


async def test_memories_stored_by_extraction_leave_tool_call_entries_and_metrics(
    tmp_path: Path, embedder: Embedder
) -> None:
    pat = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
    answer = f'[{{"content": "Operator prefers tea", "tags": ["drinks"]}}, {{"content": "CI token {pat}"}}]'
    agent = AgentConfig.model_validate(
        {"id": "nexo", "model": {"provider": "fake"}, "memory": {"extract": True}}
    )
    metrics = Metrics()
    async with servers(tmp_path, embedder) as (memory, audit):
        sink = AuditSink(cast(ServerConnection, audit))
        goal = TrackedGoal(
            id="g1", agent="nexo", kind="interactive", origin=Origin(source="channel:console"), prompt="hi"
        )
        observer = LedgerObserver(sink, GoalTracker(None), goal, "channel:console", metrics)
        with FakeLLM([Reply(answer)]) as fake:
            provider = openai(fake, VirtualTime())
            async with anyio.create_task_group() as tg:
                tg.start_soon(sink.run)
                try:
                    await remember_from_turn(
                        cast(ServerConnection, memory),
                        agent,
                        provider,
                        "I like tea; my CI token is ...",
                        "Noted.",
                        GoalResult(Outcome.DONE, text="Noted.", usage=Usage(100, 20)),
                        observer=observer,
                        metrics=metrics,
                    )
                finally:
                    await provider.aclose()
                entries = await ledger(audit, sink, "tool_call")
                tg.cancel_scope.cancel()
    assert [(e.goal_id, e.subject, e.body["call_id"], e.body["outcome"]) for e in entries] == [
        ("g1", "memory__memory_remember", "extract:1", "ok"),
        ("g1", "memory__memory_remember", "extract:2", "error"),
    ]
    assert "secret" in entries[1].body["error"]
    counters = metrics.summary()
    assert sorted((row["outcome"], row["value"]) for row in counters["nexo_memory_extractions"]) == [
        ("refused", 1.0),
        ("stored", 1.0),
    ]
    assert sorted((row["tool"], row["outcome"], row["value"]) for row in counters["nexo_tool_calls"]) == [
        ("memory_remember", "error", 1.0),
        ("memory_remember", "ok", 1.0),
    ]
