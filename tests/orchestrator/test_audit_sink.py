"""The audit sink's batching: the entries of one turn, coming close together, go in one append, and
whoever needs them stored now does not wait for the batching window."""

from __future__ import annotations

from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest

from orchestrator.goals import AuditSink
from orchestrator.mesh import ServerConnection
from shared.protocol.audit.bodies import NoticeBody
from shared.protocol.audit.entries import Appended, EntryDraft
from shared.protocol.audit.methods import AppendRequest, AppendResult

pytestmark = pytest.mark.anyio


class Audit:
    """The audit server's side of the sink's connection: records each append's entries."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.arrived = anyio.Event()

    async def request(
        self, request: AppendRequest, result_type: type[AppendResult], *, timeout: float
    ) -> Any:
        entries = request.params.entries
        self.batches.append([str(entry.body["message"]) for entry in entries])
        self.arrived.set()
        self.arrived = anyio.Event()
        return AppendResult(
            entries=[
                Appended(seq=i + 1, hash="h", at="2026-11-27T00:00:00Z", created=True)
                for i in range(len(entries))
            ]
        )


def entry(text: str) -> EntryDraft:
    return EntryDraft.of(NoticeBody(level="info", message=text), source="test")


async def test_the_entries_of_one_turn_go_in_one_append() -> None:
    audit = Audit()
    sink = AuditSink(cast(ServerConnection, audit), window_s=5.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sink.run)
        await anyio.wait_all_tasks_blocked()  # idle, as between turns
        for text in ("received", "turn", "replied"):
            sink.record(entry(text))
            await anyio.wait_all_tasks_blocked()  # the flusher is awake and waiting out its window
        assert audit.batches == []
        with anyio.fail_after(5):
            assert await sink.flush(5)
        tg.cancel_scope.cancel()
    assert audit.batches == [["received", "turn", "replied"]]
    assert sink.sent == 3


async def test_entries_further_apart_than_the_window_go_in_appends_of_their_own() -> None:
    audit = Audit()
    sink = AuditSink(cast(ServerConnection, audit), window_s=0.001)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sink.run)
        for text in ("first", "second"):
            arrived = audit.arrived
            sink.record(entry(text))
            with anyio.fail_after(5):
                await arrived.wait()
        tg.cancel_scope.cancel()
    assert audit.batches == [["first"], ["second"]]


async def test_a_flush_sends_at_once_instead_of_waiting_out_the_window() -> None:
    audit = Audit()
    sink = AuditSink(cast(ServerConnection, audit), window_s=3600.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sink.run)
        await anyio.wait_all_tasks_blocked()
        sink.record(entry("spend reserved"))
        await anyio.wait_all_tasks_blocked()
        with anyio.fail_after(5):
            stored = await sink.flush(5)
        tg.cancel_scope.cancel()
    assert stored
    assert audit.batches == [["spend reserved"]]
