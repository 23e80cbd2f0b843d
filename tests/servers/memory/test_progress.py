"""The long control methods, import and reindex, report progress to a caller that asks for it."""

from __future__ import annotations

import pytest
from mcp.shared.dispatcher import ProgressFnT

from servers.memory.embeddings import Embedder
from servers.memory.settings import MemorySettings
from shared.protocol.memory.admin import (
    ImportParams,
    ImportRequest,
    ImportResult,
    ReindexParams,
    ReindexRequest,
    ReindexResult,
)
from shared.protocol.memory.records import ImportRecord
from tests.servers.memory.conftest import call, connect
from tests.servers.memory.test_admin import Renamed

pytestmark = pytest.mark.anyio

Reports = list[tuple[float, float | None, str | None]]


def recorder(reports: Reports) -> ProgressFnT:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    return on_progress


async def test_an_import_reports_its_start_and_its_outcome(
    settings: MemorySettings, embedder: Embedder
) -> None:
    reports: Reports = []
    records = [ImportRecord(agent="nexo", content=text) for text in ("Ana likes tea", "Bo likes chess", " ")]
    async with connect(settings, embedder) as client:
        await client.session.send_request(
            ImportRequest(params=ImportParams(records=records)),
            ImportResult,
            progress_callback=recorder(reports),
        )
    assert reports == [(0, 3, "importing 3 records"), (3, 3, "2 imported, 0 refreshed, 1 rejected")]


async def test_each_reindex_step_reports_how_far_the_whole_reindex_is(
    settings: MemorySettings, embedder: Embedder
) -> None:
    reports: Reports = []
    async with connect(settings, embedder) as client:
        for fact in ("Ana likes tea", "Bo likes chess", "Carla plays jazz"):
            await call(client, "memory_remember", {"content": fact})
    maintenance = settings.model_copy(update={"allow_model_mismatch": True})
    async with connect(maintenance, Renamed(embedder, "other-model", 128)) as client:
        for _ in range(2):
            await client.session.send_request(
                ReindexRequest(params=ReindexParams(batch_size=2)),
                ReindexResult,
                progress_callback=recorder(reports),
            )
    assert reports == [(2, 3, "reindexing"), (3, 3, "reindexed")]
