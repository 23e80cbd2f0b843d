"""The ledger's sink in the orchestrator: a burst of a turn's entries goes to the audit server in one
append after a short wait; ``flush``, and any entry that is not a turn's own (a refusal, a notice),
send what is queued at once."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from orchestrator.goals import AuditSink
from orchestrator.mesh import ServerConnection
from shared.protocol.audit.bodies import ChannelBody, NoticeBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.audit.methods import AppendRequest

pytestmark = pytest.mark.anyio


class Audit:
    """The audit server as the sink sees it: each append's entries, in order."""

    def __init__(self) -> None:
        self.appends: list[list[str]] = []
        self.appended = anyio.Event()

    async def request(self, request: AppendRequest, result_type: type, *, timeout: float) -> Any:
        self.appends.append([entry.subject for entry in request.params.entries])
        self.appended.set()


def entry(subject: str) -> EntryDraft:
    """A turn's own kind of entry (a channel traffic marker), which may wait for its burst."""
    body = ChannelBody(direction="in", chat_id="c1", status="received", message_id=None, chars=1)
    return EntryDraft.of(body, source="channel:console", subject=subject)


def notice(subject: str) -> EntryDraft:
    return EntryDraft.of(NoticeBody(level="warning", message=subject), source="test", subject=subject)


async def test_a_burst_goes_in_one_append_once_flushed() -> None:
    audit = Audit()
    sink = AuditSink(cast(ServerConnection, audit), linger_s=60.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sink.run)
        await anyio.lowlevel.checkpoint()  # the flusher waits for entries
        for subject in ("in", "turn"):
            sink.record(entry(subject))
        for _ in range(10):
            await anyio.lowlevel.checkpoint()  # the flusher woke and waits out its linger
        sink.record(entry("out"))
        assert audit.appends == []
        with anyio.fail_after(5):
            assert await sink.flush(timeout=5)
        tg.cancel_scope.cancel()
    assert audit.appends == [["in", "turn", "out"]]
    assert (sink.sent, sink.pending) == (3, 0)


async def test_without_a_flush_the_burst_goes_when_the_linger_ends() -> None:
    audit = Audit()
    sink = AuditSink(cast(ServerConnection, audit), linger_s=0.01)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sink.run)
        sink.record(entry("one"))
        sink.record(entry("two"))
        with anyio.fail_after(5):
            await audit.appended.wait()
        audit.appended = anyio.Event()
        sink.record(entry("later"))  # a burst of its own
        with anyio.fail_after(5):
            await audit.appended.wait()
        tg.cancel_scope.cancel()
    assert audit.appends == [["one", "two"], ["later"]]


async def test_an_entry_that_is_not_a_turns_own_is_sent_at_once_with_what_waits() -> None:
    audit = Audit()
    sink = AuditSink(cast(ServerConnection, audit), linger_s=60.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sink.run)
        await anyio.lowlevel.checkpoint()
        sink.record(entry("in"))
        for _ in range(10):
            await anyio.lowlevel.checkpoint()
        assert audit.appends == []  # a turn's marker waits for its burst
        sink.record(notice("refused bob"))
        with anyio.fail_after(5):
            await audit.appended.wait()  # no flush: the refusal's record goes now, the marker with it
        tg.cancel_scope.cancel()
    assert audit.appends == [["in", "refused bob"]]
