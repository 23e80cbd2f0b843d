"""The operator's control-plane methods, through the MCP protocol in memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import anyio
import mcp_types as types
import numpy as np
import numpy.typing as npt
import pytest
from mcp import Client, MCPError

from servers.memory.embeddings import Embedder
from servers.memory.errors import MemoryUnavailable, ModelMismatch
from servers.memory.reindex import check_model
from servers.memory.server import build_server
from servers.memory.settings import MemorySettings
from servers.memory.state import open_database, preflight
from servers.memory.store import MemoryStore
from servers.memory.vectors import VectorIndex
from shared.protocol.memory.admin import (
    ExportParams,
    ExportRequest,
    ExportResult,
    ForgetParams,
    ForgetRequest,
    ForgetResult,
    ImportParams,
    ImportProblem,
    ImportRequest,
    ImportResult,
    ListParams,
    ListRequest,
    ListResult,
    ReindexParams,
    ReindexRequest,
    ReindexResult,
    SearchParams,
    SearchRequest,
    SearchResult,
    StatsParams,
    StatsRequest,
    StatsResult,
)
from shared.protocol.memory.memory_md import (
    ConsolidateParams,
    ConsolidateRequest,
    ConsolidateResult,
    HistoryParams,
    HistoryRequest,
    HistoryResult,
    RollbackParams,
    RollbackRequest,
    RollbackResult,
)
from shared.protocol.memory.methods import MEMORY_EXTENSION, METHODS
from shared.protocol.memory.records import ImportRecord
from tests.servers.memory.conftest import Switchable, call, connect

pytestmark = pytest.mark.anyio

R = TypeVar("R", bound=types.Result)
AWS_KEY = "AKIA" + "Z7QRSTUVWXY2ABCD"


async def ask(client: Client, request: types.Request[Any, Any], result: type[R]) -> R:
    return await client.session.send_request(request, result)


async def refused(client: Client, request: types.Request[Any, Any], result: type[R]) -> str:
    with pytest.raises(MCPError) as caught:
        await client.session.send_request(request, result)
    assert caught.value.code == types.INVALID_PARAMS
    return caught.value.message


class Renamed:
    """The real embedder presented as another model, optionally of fewer dimensions: what the server
    sees after the operator switches embedding providers."""

    def __init__(self, inner: Embedder, model_id: str, dim: int) -> None:
        self.inner = inner
        self.model_id = model_id
        self.dim = dim

    async def start(self) -> None:
        await self.inner.start()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = (await self.inner.embed(texts))[:, : self.dim]
        unit: npt.NDArray[np.float32] = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(
            np.float32
        )
        return unit


async def test_the_extension_is_advertised_in_both_protocol_eras(
    settings: MemorySettings, embedder: Embedder
) -> None:
    expected = {"methods": list(METHODS), "default_agent": "nexo", "max_content_bytes": 8192}
    async with connect(settings, embedder) as client:
        modern = (client.server_capabilities.extensions or {}).get(MEMORY_EXTENSION)
    async with Client(build_server(settings, embedder=embedder), mode="legacy") as legacy:
        handshake = (legacy.server_capabilities.experimental or {}).get(MEMORY_EXTENSION)
    assert (modern, handshake) == (expected, expected)


async def test_search_returns_raw_records_and_leaves_access_counts_alone(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async with connect(settings, embedder) as client:
        await call(
            client,
            "memory_remember",
            {"content": "Ana prefers green tea"},
            agent="ana",
            provenance="untrusted",
        )
        found = await ask(client, SearchRequest(params=SearchParams(query="tea", agent="ana")), SearchResult)
        default_agent = await ask(client, SearchRequest(params=SearchParams(query="tea")), SearchResult)
    (record,) = found.memories
    assert (record.content, record.provenance, record.access_count, found.mode) == (
        "Ana prefers green tea",
        "untrusted",
        0,
        "hybrid",
    )
    assert default_agent.memories == []


async def test_list_pages_through_every_agent_or_one_agent_and_kind(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async with connect(settings, embedder) as client:
        for i in range(5):
            agent = "ana" if i % 2 else "bob"
            await call(
                client,
                "memory_remember",
                {"content": f"fact {i}", "kind": "fact" if i < 3 else "event"},
                agent=agent,
            )
        first = await ask(client, ListRequest(params=ListParams(limit=2)), ListResult)
        second = await ask(client, ListRequest(params=ListParams(limit=2, after_id=2)), ListResult)
        last = await ask(client, ListRequest(params=ListParams(limit=2, after_id=4)), ListResult)
        ana_facts = await ask(client, ListRequest(params=ListParams(agent="ana", kind="fact")), ListResult)
        bob_first = await ask(client, ListRequest(params=ListParams(agent="bob", limit=1)), ListResult)
        exact = await ask(client, ListRequest(params=ListParams(agent="bob", limit=3)), ListResult)
    assert ([m.id for m in first.memories], first.next_after_id, first.remaining) == ([1, 2], 2, 3)
    assert ([m.id for m in second.memories], second.next_after_id, second.remaining) == ([3, 4], 4, 1)
    assert ([m.id for m in last.memories], last.next_after_id, last.remaining) == ([5], None, 0)
    assert ([m.id for m in bob_first.memories], bob_first.remaining) == ([1], 2)
    assert ([m.id for m in exact.memories], exact.next_after_id, exact.remaining) == ([1, 3, 5], None, 0)
    assert [(m.agent, m.content) for m in ana_facts.memories] == [("ana", "fact 1")]


async def test_forget_by_the_operator_works_for_any_agent_and_names_unknown_ids(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async with connect(settings, embedder) as client:
        await call(client, "memory_remember", {"content": "Ana prefers green tea"}, agent="ana")
        forgotten = await ask(client, ForgetRequest(params=ForgetParams(id=1)), ForgetResult)
        unknown = await refused(client, ForgetRequest(params=ForgetParams(id=1)), ForgetResult)
        stats = await ask(client, StatsRequest(params=StatsParams()), StatsResult)
    assert (forgotten.forgotten.id, forgotten.forgotten.content) == (1, "Ana prefers green tea")
    assert unknown == "there is no memory with id 1; call memory_recall to find the id of a memory"
    assert (stats.total, stats.vectors) == (0, 0)


async def test_export_then_import_into_a_fresh_database_restores_every_memory(
    tmp_path: Any, embedder: Embedder
) -> None:
    source = MemorySettings(state_dir=tmp_path / "a")
    async with connect(source, embedder) as client:
        for i in range(5):
            await call(
                client,
                "memory_remember",
                {"content": f"Fact {i} about gardens", "tags": [f"t{i}"]},
                agent="ana",
            )
        records = []
        params = ExportParams(limit=2)
        while True:
            page = await ask(client, ExportRequest(params=params), ExportResult)
            assert page.total == 5
            records.extend(page.records)
            if page.next_after_id is None:
                break
            params = params.model_copy(update={"after_id": page.next_after_id})
    lines = [record.model_dump_json() for record in records]
    batch = [ImportRecord.model_validate_json(line) for line in lines]
    async with connect(MemorySettings(state_dir=tmp_path / "b"), embedder) as client:
        first = await ask(client, ImportRequest(params=ImportParams(records=batch)), ImportResult)
        again = await ask(client, ImportRequest(params=ImportParams(records=batch[:2])), ImportResult)
        copied = await ask(client, ListRequest(params=ListParams()), ListResult)
        found = await ask(
            client,
            SearchRequest(params=SearchParams(query="gardens", agent="ana", mode="vector")),
            SearchResult,
        )
    assert (first.imported, first.refreshed, first.rejected) == (5, 0, [])
    assert (again.imported, again.refreshed) == (0, 2)
    assert [(m.content, m.tags, m.created_at) for m in copied.memories] == [
        (r.content, r.tags, r.created_at) for r in records
    ]
    assert len(found.memories) == 5


async def test_import_rejects_bad_records_one_by_one_and_keeps_the_rest(
    settings: MemorySettings, embedder: Embedder
) -> None:
    batch = [
        ImportRecord(agent="nexo", content="A fine memory"),
        ImportRecord(agent="nexo", content=f"key {AWS_KEY}"),
        ImportRecord(agent="nexo", content="x" * 9000),
        ImportRecord(agent="nexo", content="ok", tags=[""]),
        ImportRecord(agent="nexo", content="  "),
    ]
    async with connect(settings, embedder) as client:
        result = await ask(client, ImportRequest(params=ImportParams(records=batch)), ImportResult)
        nothing = await ask(client, ImportRequest(params=ImportParams(records=batch[1:])), ImportResult)
    assert (result.imported, result.refreshed, [p.index for p in result.rejected]) == (1, 0, [1, 2, 3, 4])
    assert (nothing.imported, len(nothing.rejected)) == (0, 4)
    assert result.rejected[3].error == "content is empty: every record needs the text of its memory"
    assert result.rejected[1] == ImportProblem(
        index=2,
        error="content is 9000 bytes; the limit is 8192 bytes (NEXO_MEMORY_MAX_CONTENT_BYTES): "
        "store a shorter summary, or split it into several memories",
    )
    assert AWS_KEY not in result.rejected[0].error


async def test_history_lists_the_revisions_of_memory_md_like_the_tool_does(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async with connect(settings, embedder) as client:
        first = await call(
            client, "memory_note", {"op": "append", "section": "People", "text": "Ana likes tea"}
        )
        second = await call(
            client, "memory_note", {"op": "append", "section": "People", "text": "Bob likes coffee"}
        )
        listed = await ask(client, HistoryRequest(params=HistoryParams(limit=1)), HistoryResult)
        tool = await call(client, "memory_history", {})
        other = await ask(client, HistoryRequest(params=HistoryParams(agent="ana")), HistoryResult)
    assert listed.model_dump(exclude={"meta"}) == {
        "content": tool["content"],
        "revisions": tool["revisions"][:1],
        "diff": None,
    }
    assert [r["rev"] for r in tool["revisions"]] == [second["rev"], first["rev"]]
    assert (other.content, other.revisions) == ("", [])


async def test_history_with_a_rev_gives_that_revisions_unified_diff(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async with connect(settings, embedder) as client:
        first = await call(
            client, "memory_note", {"op": "append", "section": "People", "text": "Ana likes tea"}
        )
        second = await call(client, "memory_note", {"op": "replace", "old": "tea", "text": "<b>coffee</b>"})
        changed = await ask(
            client, HistoryRequest(params=HistoryParams(rev=second["rev"][:8])), HistoryResult
        )
        created = await ask(client, HistoryRequest(params=HistoryParams(rev=first["rev"])), HistoryResult)
        unknown = await refused(client, HistoryRequest(params=HistoryParams(rev="deadbeef")), HistoryResult)
    assert changed.diff is not None
    assert created.diff is not None
    assert [
        line for line in changed.diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ] == [
        "-- Ana likes tea",
        "+- Ana likes <b>coffee</b>",
    ]
    assert "new file mode" in created.diff
    assert "+- Ana likes tea" in created.diff.splitlines()
    assert "unknown revision 'deadbeef'" in unknown


async def test_rollback_restores_memory_md_as_a_new_revision(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async with connect(settings, embedder) as client:
        first = await call(
            client, "memory_note", {"op": "append", "section": "People", "text": "Ana likes tea"}
        )
        await call(client, "memory_note", {"op": "append", "section": "People", "text": "Bob likes coffee"})
        restored = await ask(
            client, RollbackRequest(params=RollbackParams(rev=first["rev"][:10])), RollbackResult
        )
        history = await call(client, "memory_history", {})
        unknown = await refused(
            client, RollbackRequest(params=RollbackParams(rev="deadbeef")), RollbackResult
        )
    assert restored.content == "## People\n\n- Ana likes tea\n"
    assert history["revisions"][0] == {
        "rev": restored.rev,
        "when": history["revisions"][0]["when"],
        "message": f"rollback to {first['rev'][:12]}",
    }
    assert unknown.startswith("unknown revision 'deadbeef' of MEMORY.md for agent 'nexo'")


async def test_stats_count_per_agent_kind_and_provenance(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async with connect(settings, embedder) as client:
        await call(client, "memory_remember", {"content": "a", "kind": "fact"}, agent="ana")
        await call(
            client, "memory_remember", {"content": "b", "kind": "event"}, agent="ana", provenance="tool"
        )
        await call(client, "memory_remember", {"content": "c"}, agent="bob")
        stats = await ask(client, StatsRequest(params=StatsParams()), StatsResult)
    assert stats.model_dump(exclude={"meta", "db_bytes", "embedder"}) == {
        "total": 3,
        "archived": 0,
        "by_agent": {"ana": 2, "bob": 1},
        "by_kind": {"event": 1, "fact": 1, "note": 1},
        "by_provenance": {"owner": 2, "tool": 1},
        "sessions": 0,
        "transcript_entries": 0,
        "vectors": 3,
    }
    assert stats.db_bytes > 0
    assert stats.embedder.model_dump() == {
        "model_id": embedder.model_id,
        "dim": embedder.dim,
        "recorded_model_id": embedder.model_id,
        "recorded_dim": embedder.dim,
        "reindex_needed": False,
    }


async def test_consolidate_on_demand_defaults_to_the_default_agent(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async with connect(settings, embedder) as client:
        result = await ask(client, ConsolidateRequest(params=ConsolidateParams()), ConsolidateResult)
    assert result.model_dump(exclude={"meta"}) == {
        "agent": "nexo",
        "scored": 0,
        "promoted": [],
        "archived": [],
        "archived_count": 0,
        "skipped": [],
        "promotions": [],
    }


async def test_a_changed_embedding_model_refuses_to_start_and_names_both_models_and_the_fix(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async with connect(settings, embedder) as client:
        await call(client, "memory_remember", {"content": "Ana prefers green tea"})
    other = Renamed(embedder, "other-model", 128)
    with pytest.raises(ModelMismatch) as caught:
        async with connect(settings, other):
            pass
    assert str(caught.value) == (
        f"the memory database was indexed with embedding model {embedder.model_id!r} ({embedder.dim} dims) "
        "but the configured model is 'other-model' (128 dims); vectors of different models cannot be "
        "compared. Fix: run `nexo memory reindex` to re-embed every memory with the configured model, "
        "or configure the old model again (NEXO_MEMORY_EMBEDDING__*)"
    )


async def test_reindex_moves_every_memory_to_the_new_model_batch_by_batch(
    settings: MemorySettings, embedder: Embedder
) -> None:
    facts = ["Ana prefers green tea", "Bob's car is blue", "The cat is named Miso"]
    async with connect(settings, embedder) as client:
        for fact in facts:
            await call(client, "memory_remember", {"content": fact})
    other = Renamed(embedder, "other-model", 128)
    maintenance = settings.model_copy(update={"allow_model_mismatch": True})
    async with connect(maintenance, other) as client:
        before = await ask(client, StatsRequest(params=StatsParams()), StatsResult)
        degraded = await call(client, "memory_recall", {"query": "green tea"})
        blocked = await client.call_tool("memory_remember", {"content": "Carla plays jazz"})
        no_import = await refused(
            client,
            ImportRequest(
                params=ImportParams(records=[ImportRecord(agent="nexo", content="Carla plays jazz")])
            ),
            ImportResult,
        )
        steps = [
            await ask(client, ReindexRequest(params=ReindexParams(batch_size=2)), ReindexResult)
            for _ in range(2)
        ]
        meaning = await call(client, "memory_recall", {"query": "a hot drink", "mode": "vector", "limit": 1})
    assert before.embedder.reindex_needed
    assert (degraded["mode"], [m["content"] for m in degraded["memories"]]) == ("keyword", [facts[0]])
    assert blocked.is_error
    assert no_import.startswith(
        "memories cannot be imported right now: the stored vectors come from embedding"
    )
    assert [(s.done, s.total, s.finished, s.model_id, s.dim) for s in steps] == [
        (2, 3, False, "other-model", 128),
        (3, 3, True, "other-model", 128),
    ]
    assert [m["content"] for m in meaning["memories"]] == [facts[0]]
    async with connect(settings, other) as client:
        after = await ask(client, StatsRequest(params=StatsParams()), StatsResult)
    assert (after.vectors, after.embedder.reindex_needed) == (3, False)


async def test_an_import_the_embedder_cannot_embed_is_refused_whole(
    settings: MemorySettings, embedder: Embedder
) -> None:
    failing = Switchable(embedder)
    failing.failing = True
    batch = [ImportRecord(agent="nexo", content="Carla plays jazz")]
    async with connect(settings, failing) as client:
        message = await refused(client, ImportRequest(params=ImportParams(records=batch)), ImportResult)
        stats = await ask(client, StatsRequest(params=StatsParams()), StatsResult)
    assert message == (
        "the batch could not be embedded (the embedding service is unreachable (test)); try the import again"
    )
    assert stats.total == 0


def test_preflight_reports_a_changed_model_before_the_server_starts(settings: MemorySettings) -> None:
    async def record_other_model() -> None:
        async with open_database(settings) as db:
            await check_model(MemoryStore(db, VectorIndex(db, 8)), "old-model", 8, allow_mismatch=False)

    anyio.run(record_other_model)
    with pytest.raises(ModelMismatch) as caught:
        preflight(settings)
    assert (caught.value.recorded, caught.value.recorded_dim) == ("old-model", 8)
    preflight(settings.model_copy(update={"allow_model_mismatch": True}))


def test_preflight_reports_an_unknown_guard_rule(settings: MemorySettings) -> None:
    with pytest.raises(MemoryUnavailable) as caught:
        preflight(settings.model_copy(update={"guard_disabled_rules": ["no-such-rule"]}))
    assert str(caught.value).startswith("unknown secret guard rule id(s) 'no-such-rule' in disabled_rules")
