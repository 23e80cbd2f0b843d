"""Group commit: one writer task turns many concurrent appends into few fsyncs. No MCP imports.

With ``synchronous=FULL`` every commit waits for the disk. Appending one entry per transaction
makes each caller pay that wait in turn; here callers queue their entries and one writer commits
whatever queued while the previous commit was on disk, in one transaction. Each caller still
returns only after its own entries are committed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from servers.audit.drafts import checked_draft
from servers.audit.errors import WriterStopped
from servers.audit.store import Checked, Ledger
from shared.db import StorageFull
from shared.protocol.audit.entries import Appended, EntryDraft

logger = logging.getLogger("nexo.audit.writer")


@dataclass(eq=False)
class _Pending:
    items: list[Checked]
    done: anyio.Event = field(default_factory=anyio.Event)
    result: list[Appended] | None = None
    error: BaseException | None = None

    def finish(self, result: list[Appended] | None = None, error: BaseException | None = None) -> None:
        self.result, self.error = result, error
        self.done.set()


class GroupCommitter:
    def __init__(
        self, ledger: Ledger, *, max_batch: int = 256, window_s: float = 0.0, queue_max: int = 10_000
    ) -> None:
        self.ledger = ledger
        self.max_batch = max_batch
        self.window_s = window_s
        self.queue_max = queue_max
        self.batches = 0
        self.entries = 0
        self._send: MemoryObjectSendStream[_Pending] | None = None

    async def append(self, drafts: Sequence[EntryDraft]) -> list[Appended]:
        """Validate, then wait until the entries are committed; InvalidEntry before anything is queued."""
        pending = _Pending([checked_draft(draft) for draft in drafts])
        if self._send is None:
            raise WriterStopped("the audit writer is not running (is the server shutting down?)")
        try:
            await self._send.send(pending)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise WriterStopped("the audit writer is not running (is the server shutting down?)") from None
        await pending.done.wait()
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    async def _next(self, receive: MemoryObjectReceiveStream[_Pending], deadline: float) -> _Pending | None:
        try:
            return receive.receive_nowait()
        except anyio.WouldBlock:
            pass
        remaining = deadline - anyio.current_time()
        if remaining <= 0:
            return None
        with anyio.move_on_after(remaining):
            return await receive.receive()
        return None

    async def _gather(self, receive: MemoryObjectReceiveStream[_Pending], first: _Pending) -> list[_Pending]:
        """``first`` plus whatever else is queued (or arrives within the window), up to the batch size."""
        batch, count = [first], len(first.items)
        deadline = anyio.current_time() + self.window_s
        while count < self.max_batch:
            pending = await self._next(receive, deadline)
            if pending is None:
                break
            batch.append(pending)
            count += len(pending.items)
        return batch

    async def _commit(self, batch: list[_Pending]) -> None:
        try:
            async with self.ledger.writing() as writer:
                results = await writer.add([item for pending in batch for item in pending.items])
        except Exception as exc:  # noqa: BLE001 -- handed to every waiting caller, who raises it
            if not isinstance(exc, StorageFull):  # logged once per condition by the storage layer
                logger.warning("audit commit of %d appends failed: %r", len(batch), exc)
            for pending in batch:
                pending.finish(error=exc)
            return
        self.batches += 1
        self.entries += len(results)
        start = 0
        for pending in batch:
            pending.finish(result=results[start : start + len(pending.items)])
            start += len(pending.items)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The writer task. When it stops, callers still waiting get WriterStopped, never silence."""
        send, receive = anyio.create_memory_object_stream[_Pending](self.queue_max)
        self._send = send
        batch: list[_Pending] = []
        task_status.started()
        try:
            async for first in receive:
                batch = await self._gather(receive, first)
                await self._commit(batch)
                batch = []
        finally:
            send.close()
            stopped = WriterStopped(
                "the audit server stopped before the entry was committed: it was not recorded"
            )
            for pending in [*batch, *_drain(receive)]:
                if not pending.done.is_set():
                    pending.finish(error=stopped)
            receive.close()


def _drain(receive: MemoryObjectReceiveStream[_Pending]) -> list[_Pending]:
    leftovers: list[_Pending] = []
    while True:
        try:
            leftovers.append(receive.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            return leftovers
