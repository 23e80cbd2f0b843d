"""Group commit: one writer task turns many concurrent appends into few fsyncs. No MCP imports.

With ``synchronous=FULL`` every commit waits for the disk. Appending one entry per transaction
makes each caller pay that wait in turn; here callers queue their entries and one writer commits
whatever queued while the previous commit was on disk, in one transaction. Each caller still
returns only after its own entries are committed.

The goal registry's writes join the same batches (``run_in_batch``): a goal's creation and its
ledger entry share a disk wait with the appends and goal changes queued beside them. Each such
write runs under a savepoint, so one refused (an unknown goal, a transition not allowed) is undone
alone and the rest of its batch still commits.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from servers.audit.drafts import checked_draft
from servers.audit.errors import WriterStopped
from servers.audit.store import ChainWriter, Checked, Ledger
from shared.db import StorageFull
from shared.protocol.audit.entries import Appended, EntryDraft

logger = logging.getLogger("nexo.audit.writer")
T = TypeVar("T")


Step = Callable[[ChainWriter], Awaitable[None]]


@dataclass(eq=False)
class _Pending:
    items: list[Checked]
    step: Step | None = None
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
        pending = await self._submit(_Pending([checked_draft(draft) for draft in drafts]))
        assert pending.result is not None
        return pending.result

    async def run_in_batch(self, work: Callable[[ChainWriter], Awaitable[T]]) -> T:
        """Run ``work`` in the next batch's transaction; return its answer once that is committed."""
        answers: list[T] = []

        async def step(writer: ChainWriter) -> None:
            answers.append(await work(writer))

        await self._submit(_Pending([], step))
        return answers[0]

    async def _submit(self, pending: _Pending) -> _Pending:
        if self._send is None:
            raise WriterStopped("the audit writer is not running (is the server shutting down?)")
        try:
            await self._send.send(pending)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise WriterStopped("the audit writer is not running (is the server shutting down?)") from None
        await pending.done.wait()
        if pending.error is not None:
            raise pending.error
        return pending

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
        batch, count = [first], _weight(first)
        deadline = anyio.current_time() + self.window_s
        while count < self.max_batch:
            pending = await self._next(receive, deadline)
            if pending is None:
                break
            batch.append(pending)
            count += _weight(pending)
        return batch

    async def _commit(self, batch: list[_Pending]) -> None:
        results: list[list[Appended]] = []
        refusals: list[BaseException | None] = []
        try:
            async with self.ledger.writing() as writer:
                for pending in batch:
                    if pending.step is None:
                        results.append(await writer.add(pending.items))
                        refusals.append(None)
                    else:
                        results.append([])
                        refusals.append(await _isolated(writer, pending.step))
        except Exception as exc:  # noqa: BLE001 -- handed to every waiting caller, who raises it
            if not isinstance(exc, StorageFull):  # logged once per condition by the storage layer
                logger.warning("audit commit of %d appends failed: %r", len(batch), exc)
            for pending in batch:
                pending.finish(error=exc)
            return
        self.batches += 1
        self.entries += sum(len(appended) for appended in results)
        for pending, appended, refusal in zip(batch, results, refusals, strict=True):
            pending.finish(result=appended, error=refusal)

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


def _weight(pending: _Pending) -> int:
    return len(pending.items) if pending.step is None else 1


async def _isolated(writer: ChainWriter, step: Step) -> BaseException | None:
    """Run ``step`` under a savepoint: what it raises undoes its own writes only, and is returned."""
    head = writer.head
    await writer.tx.execute("SAVEPOINT batched_write")
    try:
        await step(writer)
    except Exception as exc:  # noqa: BLE001 -- handed to the caller, who raises it
        await writer.tx.execute("ROLLBACK TO batched_write")
        await writer.tx.execute("RELEASE batched_write")
        writer.head = head
        return exc
    await writer.tx.execute("RELEASE batched_write")
    return None


def _drain(receive: MemoryObjectReceiveStream[_Pending]) -> list[_Pending]:
    leftovers: list[_Pending] = []
    while True:
        try:
            leftovers.append(receive.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            return leftovers
