"""The memory server's metrics: recall latency by mode, memories by state and the import rate, read
through ``nexo/memory/metrics`` as the orchestrator's /metrics and `nexo memory stats` read them."""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families

from orchestrator.cli.memory_figures import figures
from orchestrator.metrics import Metrics, memory_server_metrics, serve_metrics
from servers.memory.embeddings import Embedder
from servers.memory.settings import MemorySettings
from servers.memory.state import MIGRATIONS
from shared.db import Database
from shared.protocol.memory.admin import (
    ImportParams,
    ImportRequest,
    ImportResult,
    MetricsParams,
    MetricsRequest,
    MetricsResult,
)
from shared.protocol.memory.records import ImportRecord
from tests.servers.memory.conftest import call, connect

pytestmark = pytest.mark.anyio


class Connected:
    """The two things the orchestrator's collector uses of a mesh connection."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def request(
        self, request: types.Request[Any, Any], result_type: type[Any], *, timeout: float
    ) -> Any:
        return await self.client.session.send_request(request, result_type)


async def test_recalls_memories_and_imports_are_measured(
    settings: MemorySettings, embedder: Embedder
) -> None:
    records = [
        ImportRecord(agent="nexo", content="Ana likes green tea"),
        ImportRecord(agent="nexo", content="The boiler was serviced in May"),
        ImportRecord(agent="nexo", content="  "),
    ]
    async with connect(settings, embedder) as client:
        before = figures(
            (await client.session.send_request(MetricsRequest(params=MetricsParams()), MetricsResult)).text
        )
        await client.session.send_request(ImportRequest(params=ImportParams(records=records)), ImportResult)
        for mode in ("hybrid", "hybrid", "keyword", "vector"):
            await call(client, "memory_recall", {"query": "tea", "mode": mode})
        text = await memory_server_metrics({"memory": Connected(client)})  # type: ignore[dict-item]
    after = figures(text)
    assert (before.recalls, before.memories, before.imported) == ({}, {"active": 0, "archived": 0}, {})
    assert {mode: r.count for mode, r in after.recalls.items()} == {"hybrid": 2, "keyword": 1, "vector": 1}
    assert all(r.seconds > 0 and r.at_most(0.95) is not None for r in after.recalls.values())
    assert after.memories == {"active": 2, "archived": 0}
    assert after.imported == {"imported": 2, "refreshed": 0, "rejected": 1}
    assert after.import_seconds > 0
    assert after.latest_import_rate == pytest.approx(3 / after.import_seconds)
    summary = after.as_json()
    assert (summary["import"]["records"], summary["recall"]["hybrid"]["count"]) == (after.imported, 2)
    assert after.vectors["index"] == 2
    assert after.lines()[0].startswith("recalls       hybrid 2 (mean ")
    assert after.lines()[1].startswith("vectors       2 in the search index, ")
    assert after.lines()[2].startswith("imported      3 records since start at ")
    assert summary["vectors"] == after.vectors


async def test_the_orchestrators_metrics_endpoint_appends_what_the_memory_server_exports(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async with connect(settings, embedder) as client:
        await call(client, "memory_recall", {"query": "tea", "mode": "keyword"})

        async def collect() -> str:
            return await memory_server_metrics({"memory": Connected(client)})  # type: ignore[dict-item]

        ours = Metrics()
        ours.extractions.labels("nexo", "stored").inc()
        async with anyio.create_task_group() as tg:
            host, port = await tg.start(
                partial(serve_metrics, collect=collect), ours, "127.0.0.1", 0, lambda: None
            )
            async with httpx2.AsyncClient() as http:
                scraped = (await http.get(f"http://{host}:{port}/metrics", timeout=10)).text
            tg.cancel_scope.cancel()
    families = {family.name: family for family in text_string_to_metric_families(scraped)}
    assert {"nexo_memory_extractions", "nexo_memory_recall_seconds", "nexo_memory_memories"} <= set(families)
    assert figures(scraped).recalls["keyword"].count == 1


async def test_a_scrape_counts_memories_by_state_in_one_pass_over_an_index(
    settings: MemorySettings, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scrape every few seconds: grouping every row by kind and provenance as `nexo memory stats`
    does took 1.5 s at a million memories, holding the database meanwhile."""
    records = [ImportRecord(agent="nexo", content=f"fact number {i} about the garden") for i in range(5)]
    asked: list[str] = []
    fetchone, fetchall = Database.fetchone, Database.fetchall

    async def one(self: Database, sql: str, params: Any = ()) -> Any:
        asked.append(sql)
        return await fetchone(self, sql, params)

    async def every(self: Database, sql: str, params: Any = ()) -> Any:
        asked.append(sql)
        return await fetchall(self, sql, params)

    async with connect(settings, embedder) as client:
        await client.session.send_request(ImportRequest(params=ImportParams(records=records)), ImportResult)
        async with Database.open(settings.database, MIGRATIONS) as other:  # as consolidation would
            await other.execute("UPDATE memories SET archived = 1 WHERE id IN (1, 2)")
        monkeypatch.setattr(Database, "fetchone", one)
        monkeypatch.setattr(Database, "fetchall", every)
        text = (await client.session.send_request(MetricsRequest(params=MetricsParams()), MetricsResult)).text
        monkeypatch.undo()
        plans = [str(step[3]) for sql in asked for step in await client_db_plan(settings, sql)]
    assert figures(text).memories == {"active": 3, "archived": 2}
    assert asked == ["SELECT count(*), total(archived) FROM memories"]
    assert plans == ["SCAN memories USING COVERING INDEX memories_by_agent"]


async def client_db_plan(settings: MemorySettings, sql: str) -> list[tuple[Any, ...]]:
    async with Database.open(settings.database, MIGRATIONS) as db:
        return await db.fetchall("EXPLAIN QUERY PLAN " + sql)
