"""Short-term sessions: the registry, bounded transcripts and idle GC, through the control plane."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError

from servers.memory.embeddings import Embedder
from servers.memory.settings import MemorySettings
from shared.protocol.memory.sessions import (
    SessionAppendParams,
    SessionAppendRequest,
    SessionAppendResult,
    SessionGcParams,
    SessionGcRequest,
    SessionGcResult,
    SessionHistoryParams,
    SessionHistoryRequest,
    SessionHistoryResult,
    SessionResolveParams,
    SessionResolveRequest,
    SessionResolveResult,
    StoredEntry,
    TranscriptEntry,
)
from tests.servers.memory.conftest import DAY, START, Clock, connect

pytestmark = pytest.mark.anyio

AWS_KEY = "AKIA" + "Z7QRSTUVWXY2ABCD"


async def resolve(client: Client, key: str, agent: str = "nexo") -> SessionResolveResult:
    params = SessionResolveParams(agent=agent, session_key=key)
    return await client.session.send_request(SessionResolveRequest(params=params), SessionResolveResult)


async def append(
    client: Client, session_id: int, *entries: TranscriptEntry, agent: str = "nexo"
) -> SessionAppendResult:
    params = SessionAppendParams(agent=agent, session_id=session_id, entries=list(entries))
    return await client.session.send_request(SessionAppendRequest(params=params), SessionAppendResult)


async def history(client: Client, session_id: int, limit: int = 50, agent: str = "nexo") -> list[StoredEntry]:
    params = SessionHistoryParams(agent=agent, session_id=session_id, limit=limit)
    result = await client.session.send_request(SessionHistoryRequest(params=params), SessionHistoryResult)
    return result.entries


def said(role: Any, content: str, **extra: Any) -> TranscriptEntry:
    return TranscriptEntry(role=role, content=content, **extra)


async def test_a_restarted_orchestrator_reattaches_to_the_same_conversation(
    settings: MemorySettings, embedder: Embedder, clock: Clock
) -> None:
    async with connect(settings, embedder, clock) as client:
        first = await resolve(client, "console:operator")
        await append(client, first.session_id, said("user", "hi", turn_id="t1"), said("assistant", "Hello!"))
    clock.advance(3600)
    async with connect(settings, embedder, clock) as client:
        again = await resolve(client, "console:operator")
        other = await resolve(client, "console:work")
        entries = await history(client, again.session_id)
    assert first.model_dump(exclude={"meta"}) == {
        "session_id": 1,
        "created": True,
        "previous_active_at": None,
        "entries": 0,
    }
    assert again.model_dump(exclude={"meta"}) == {
        "session_id": 1,
        "created": False,
        "previous_active_at": START,
        "entries": 2,
    }
    assert (other.session_id, other.created) == (2, True)
    assert entries == [
        StoredEntry(id=1, role="user", content="hi", turn_id="t1", at=START),
        StoredEntry(id=2, role="assistant", content="Hello!", turn_id=None, at=START),
    ]


async def test_transcripts_keep_only_the_newest_entries_up_to_the_cap(
    tmp_path: Any, embedder: Embedder
) -> None:
    settings = MemorySettings(state_dir=tmp_path, transcript_max_entries=3)
    async with connect(settings, embedder) as client:
        session = await resolve(client, "k")
        first = await append(client, session.session_id, *(said("user", f"m{i}") for i in range(2)))
        second = await append(client, session.session_id, *(said("user", f"m{i}") for i in range(2, 5)))
        kept = await history(client, session.session_id)
        last_two = await history(client, session.session_id, limit=2)
    assert (first.trimmed, second.trimmed) == (0, 2)
    assert [e.content for e in kept] == ["m2", "m3", "m4"]
    assert [e.content for e in last_two] == ["m3", "m4"]


async def test_a_retried_append_with_dedupe_keys_is_stored_once(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async with connect(settings, embedder) as client:
        session = await resolve(client, "k")
        entries = [said("user", "hi", dedupe_key="in:1"), said("assistant", "hello", dedupe_key="out:1")]
        first = await append(client, session.session_id, *entries)
        retry = await append(client, session.session_id, *entries)
        kept = await history(client, session.session_id)
    assert (first.appended, first.duplicates, retry.appended, retry.duplicates) == (2, 0, 0, 2)
    assert [e.content for e in kept] == ["hi", "hello"]


async def test_sessions_idle_past_the_horizon_are_collected_with_their_transcripts(
    settings: MemorySettings, embedder: Embedder, clock: Clock
) -> None:
    async with connect(settings, embedder, clock) as client:
        old = await resolve(client, "old")
        await append(client, old.session_id, said("user", "hello"))
        clock.advance(20 * DAY)
        recent = await resolve(client, "recent")
        clock.advance(11 * DAY)
        by_default = await client.session.send_request(
            SessionGcRequest(params=SessionGcParams()), SessionGcResult
        )
        reborn = await resolve(client, "old")
        clock.advance(2 * DAY)
        explicit = await client.session.send_request(
            SessionGcRequest(params=SessionGcParams(idle_s=DAY)), SessionGcResult
        )
    assert (by_default.removed, explicit.removed) == (1, 2)
    assert (reborn.created, reborn.entries, reborn.session_id != old.session_id) == (True, 0, True)
    assert recent.created


async def test_idle_sessions_are_also_collected_when_the_server_starts(
    settings: MemorySettings, embedder: Embedder, clock: Clock
) -> None:
    async with connect(settings, embedder, clock) as client:
        await resolve(client, "old")
    clock.advance(31 * DAY)
    async with connect(settings, embedder, clock) as client:
        again = await resolve(client, "old")
    assert again.created


async def test_a_secret_in_a_transcript_entry_is_refused_and_nothing_of_the_batch_is_stored(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async with connect(settings, embedder) as client:
        session = await resolve(client, "k")
        with pytest.raises(MCPError) as caught:
            await append(client, session.session_id, said("user", "ok"), said("user", f"key {AWS_KEY}"))
        kept = await history(client, session.session_id)
    assert caught.value.code == types.INVALID_PARAMS
    assert caught.value.message.startswith(
        "refused to store this transcript entry 1 content: it contains what looks like a secret"
    )
    assert AWS_KEY not in caught.value.message
    assert kept == []


BAD_CALLS: dict[str, Callable[[Client, int], Awaitable[object]]] = {
    "append_other_agent": lambda client, sid: append(client, sid, said("user", "hi"), agent="bob"),
    "append_unknown": lambda client, sid: append(client, 99, said("user", "hi")),
    "history_other_agent": lambda client, sid: history(client, sid, agent="bob"),
    "append_oversized": lambda client, sid: append(client, sid, said("user", "x" * 9000)),
}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("append_other_agent", "agent 'bob' has no session 1 (it may have been removed after being idle); "),
        ("append_unknown", "agent 'nexo' has no session 99 (it may have been removed after being idle); "),
        ("history_other_agent", "agent 'bob' has no session 1; resolve the session key again"),
        ("append_oversized", "transcript entry 0 is 9000 bytes; the limit is 8192 bytes"),
    ],
)
async def test_bad_session_calls_are_refused_with_invalid_params(
    settings: MemorySettings, embedder: Embedder, call: str, message: str
) -> None:
    async with connect(settings, embedder) as client:
        session = await resolve(client, "k")
        with pytest.raises(MCPError) as caught:
            await BAD_CALLS[call](client, session.session_id)
    assert caught.value.code == types.INVALID_PARAMS
    assert caught.value.message.startswith(message), caught.value.message


async def test_a_malformed_request_is_rejected_before_it_reaches_the_store(
    settings: MemorySettings, embedder: Embedder
) -> None:
    bad = SessionResolveParams.model_construct(agent="Not An Id", session_key="k")
    async with connect(settings, embedder) as client:
        with pytest.raises(MCPError) as caught:
            await client.session.send_request(SessionResolveRequest(params=bad), SessionResolveResult)
    assert caught.value.code == types.INVALID_PARAMS


async def test_every_n_assistant_turns_trigger_a_consolidation_pass(
    tmp_path: Any, embedder: Embedder
) -> None:
    settings = MemorySettings.model_validate(
        {"state_dir": tmp_path, "consolidation": {"every_assistant_turns": 2, "promote_threshold": 0.1}}
    )
    async with connect(settings, embedder) as client:
        await client.call_tool("memory_remember", {"content": "Ana prefers green tea", "importance": 0.9})
        session = await resolve(client, "k")
        one = await append(client, session.session_id, said("user", "q1"), said("assistant", "a1"))
        two = await append(client, session.session_id, said("user", "q2"), said("assistant", "a2"))
        three = await append(client, session.session_id, said("assistant", "a3", dedupe_key="a3"))
        retried = await append(client, session.session_id, said("assistant", "a3", dedupe_key="a3"))
    assert [r.consolidated for r in (one, two, three, retried)] == [False, True, False, False]
    assert (three.appended, retried.duplicates) == (1, 1)
    assert (settings.agents_dir / "nexo" / "MEMORY.md").read_text() == (
        "## Consolidated\n\n- Ana prefers green tea\n"
    )


async def test_a_failed_consolidation_pass_is_logged_and_the_entries_are_kept(
    tmp_path: Any, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    settings = MemorySettings.model_validate(
        {"state_dir": tmp_path, "consolidation": {"every_assistant_turns": 1, "promote_threshold": 0.1}}
    )
    (settings.agents_dir / "nexo" / "MEMORY.md").mkdir(parents=True)
    async with connect(settings, embedder) as client:
        await client.call_tool("memory_remember", {"content": "Ana prefers green tea", "importance": 0.9})
        session = await resolve(client, "k")
        with caplog.at_level(logging.WARNING, logger="nexo.memory"):
            appended = await append(client, session.session_id, said("assistant", "a1"))
        kept = await history(client, session.session_id)
    assert (appended.appended, appended.consolidated) == (1, False)
    assert [e.content for e in kept] == ["a1"]
    (record,) = [r for r in caplog.records if r.name == "nexo.memory"]
    assert record.getMessage().startswith("consolidation of agent nexo failed: ")
