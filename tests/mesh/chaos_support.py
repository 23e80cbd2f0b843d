"""The driver of the channel chaos scenario: a chat client that survives the console dying under it.

One epoch is one orchestrator process. The client connects to its console (sometimes only after the
new orchestrator has answered a redelivered message, so replies wait in the outbox for the Hello),
resends every message whose ``Queued`` acknowledgement never came, and sends the rest in random
bursts while it counts answers. At the epoch's kill point it SIGKILLs the orchestrator, reads the
socket until the console closes it and waits for the console process itself to be gone. The last
epoch is never killed: it sends everything left plus a sentinel whose answer proves the queue drained.
"""

from __future__ import annotations

import os
import random
import re
import signal
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio

from orchestrator.cli.chat_loop import ChatSession
from orchestrator.cli.chat_view import ConsoleClosed
from shared.protocol.console_wire import Queued, Reply, Say
from tests.fakes.llm import RecordedRequest
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.console import operator
from tests.mesh.harness import Orchestrator, child_pids, running

CHAT_ID = "operator"
SENTINEL = "drain"
EPOCH_TIMEOUT_S = 90.0
EXIT_TIMEOUT_S = 30.0
ANSWERED_MARK = "answered g-"
"""The orchestrator's log line once a reply went through the console (shown or kept for the chat)."""
_ASKED = re.compile(r"please answer (\w+)")
_GONE = (ConsoleClosed,)
"""What ChatSession raises when the console's connection ends (it never lets the stream errors out)."""

OutboxStatus = Literal["pending", "sending", "sent", "uncertain", "failed"]
Alongside = Callable[[], AbstractContextManager[list[int]]]
"""Servers an epoch runs beside the orchestrator (e.g. the console over Streamable HTTP): started
before it, stopped after it, and SIGKILLed with it; the context yields their process ids."""


def message_ids(count: int) -> list[str]:
    return [f"m{n:04d}" for n in range(count)]


def question(message_id: str) -> str:
    return f"please answer {message_id}"


def answer(message_id: str) -> str:
    return f"answer to {message_id}"


def echo_model(request: RecordedRequest) -> ModelReply:
    """The fake model's answer: it names the message it was asked about, so answers map to messages."""
    asked = _ASKED.search(request.last_user_text or "")
    return ModelReply(answer(asked.group(1)) if asked else "no message id in the prompt")


def event_key(message_id: str) -> str:
    return f"console:{CHAT_ID}:{message_id}"


def reply_key(message_id: str) -> str:
    return f"reply:console:{event_key(message_id)}"


@dataclass(frozen=True)
class OutboxRow:
    id: int
    idempotency_key: str
    text: str
    reply_to: str | None
    status: OutboxStatus
    notice: bool


@dataclass(frozen=True)
class EventRow:
    dedupe_key: str
    kind: str
    deliveries: int
    acked: bool
    dead: bool


@contextmanager
def _read_only(database: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as conn:
        yield conn


def read_outbox(database: Path) -> list[OutboxRow]:
    with _read_only(database) as conn:
        rows = conn.execute(
            "SELECT id, idempotency_key, text, reply_to, status, notice FROM outbox ORDER BY id"
        ).fetchall()
    return [OutboxRow(int(r[0]), str(r[1]), str(r[2]), r[3], r[4], bool(r[5])) for r in rows]


def read_events(database: Path) -> list[EventRow]:
    with _read_only(database) as conn:
        rows = conn.execute(
            "SELECT dedupe_key, kind, deliveries, acked_at IS NOT NULL, dead_at IS NOT NULL FROM events "
            "ORDER BY seq"
        ).fetchall()
    return [EventRow(str(r[0]), str(r[1]), int(r[2]), bool(r[3]), bool(r[4])) for r in rows]


@dataclass(frozen=True)
class KillPoint:
    settled: int
    """Kill once this many messages are answered (or known to be uncertain), ..."""
    acks: int
    """... at the n-th ``Queued`` frame from then on, or at the next Reply when 0. Messages go out in
    bursts, so their acknowledgements arrive wherever the orchestrator is in an answer, sends included."""


@dataclass(frozen=True)
class Epoch:
    kill: KillPoint | None
    """None for the last epoch, which drains everything and stops cleanly."""
    late: bool
    """Connect only once the new orchestrator answered a redelivered message."""


def plan(rng: random.Random, messages: int, kills: int, window: int) -> list[Epoch]:
    """Kill moments spread over the run, each timed on a reply or on an inbound acknowledgement."""
    points = [KillPoint(n, rng.randint(0, window)) for n in sorted(rng.sample(range(1, messages), kills))]
    return [Epoch(point, rng.random() < 0.5) for point in [*points, None]]


@dataclass
class Tally:
    """What the chat client saw over the whole run."""

    said: set[str] = field(default_factory=set)
    queued: set[str] = field(default_factory=set)
    replies: list[Reply] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)
    uncertain: set[str] = field(default_factory=set)
    """Learned from the outbox after each restart: these are never answered on the socket again."""
    resent: int = 0
    duplicate_acks: int = 0
    late_connects: int = 0
    kills: int = 0
    epoch_seconds: list[float] = field(default_factory=list)

    def settled(self) -> int:
        return len(self.answered | self.uncertain)


async def wait_exited(pids: list[int], timeout: float = 30.0) -> None:
    """Block until every process in ``pids`` has exited, through pidfds (no polling): its ports are
    free again."""
    fds: list[int] = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            continue
    try:
        with anyio.fail_after(timeout):
            for fd in fds:
                await anyio.wait_readable(fd)
    finally:
        for fd in fds:
            os.close(fd)


class ChaosDriver:
    def __init__(
        self,
        config: Path,
        state_dir: Path,
        ids: list[str],
        *,
        window: int,
        bursts: random.Random,
        alongside: Alongside | None = None,
    ) -> None:
        self.config = config
        self.alongside = alongside
        self.state_dir = state_dir
        self.database = state_dir / "console" / "console.db"
        self.ids = ids
        self.window = window
        self.bursts = bursts
        self.tally = Tally()
        self._next = 0
        self._changed = anyio.Event()

    async def run(self, epochs: list[Epoch], clock: Callable[[], float]) -> Tally:
        for epoch in epochs:
            started = clock()
            with anyio.fail_after(EPOCH_TIMEOUT_S):
                await self._epoch(epoch.kill, late=epoch.late)
            self.tally.epoch_seconds.append(clock() - started)
        return self.tally

    def _touch(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _outstanding(self) -> int:
        t = self.tally
        return len(t.said - t.answered - t.uncertain)

    async def _epoch(self, kill_at: KillPoint | None, *, late: bool) -> None:
        t = self.tally
        stack = ExitStack()
        try:
            beside = (
                []
                if self.alongside is None
                else await anyio.to_thread.run_sync(stack.enter_context, self.alongside())
            )
            orch = await anyio.to_thread.run_sync(stack.enter_context, running(self.config))
            # Every stored message without an answer comes back to the new orchestrator, which logs
            # its answer even when no chat is there to see it: connecting after that line makes the
            # console keep replies for this chat until the Hello.
            if late and t.queued - t.answered - t.uncertain:
                t.late_connects += 1
                await anyio.to_thread.run_sync(orch.wait_for_line, ANSWERED_MARK)
            async with operator(self.state_dir, CHAT_ID) as session:
                # The console marked interrupted sends uncertain before it listened on its socket.
                t.uncertain |= {
                    row.reply_to
                    for row in read_outbox(self.database)
                    if row.status == "uncertain" and row.reply_to is not None
                }
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._say, session, kill_at is None)
                    await self._listen(session, orch, kill_at, beside)
                    tg.cancel_scope.cancel()
        finally:
            # A clean stop for the final epoch (and after any failure): the harness sends SIGTERM.
            await anyio.to_thread.run_sync(stack.close)

    async def _say(self, session: ChatSession, final: bool) -> None:
        t = self.tally
        try:
            # The first Say after the Hello doubles as a barrier: its Queued comes only after the
            # console replayed the replies it kept. With nothing to resend, an acknowledged message is
            # said again, which the console recognises by its id.
            unacknowledged = sorted(t.said - t.queued)
            for message_id in unacknowledged or sorted(t.queued)[-1:]:
                t.resent += 1
                await session.send(Say(id=message_id, text=question(message_id)))
            while self._next < len(self.ids):
                while self._outstanding() > self.window // 4:
                    await self._changed.wait()
                burst = self.ids[self._next : self._next + self.bursts.randint(1, self.window)]
                self._next += len(burst)
                for message_id in burst:
                    t.said.add(message_id)
                    await session.send(Say(id=message_id, text=question(message_id)))
            if final:
                while not t.queued.issuperset(self.ids):
                    await self._changed.wait()
                await session.send(Say(id=SENTINEL, text=question(SENTINEL)))
        except (*_GONE, OSError):
            return  # the console died under us; the listener sees the end and the next epoch resends

    def _due(self, point: KillPoint, frame: object, acks: int) -> bool:
        t = self.tally
        # When no frame of the wanted kind can come any more, the next frame of any kind will do.
        if point.acks:
            return acks >= point.acks or t.queued.issuperset(self.ids)
        return isinstance(frame, Reply) or t.settled() == len(self.ids)

    async def _listen(
        self, session: ChatSession, orch: Orchestrator, kill_at: KillPoint | None, beside: list[int]
    ) -> None:
        t = self.tally
        # Looked up before the kill so the signal follows the triggering frame at once.
        console = child_pids(orch.process.pid, "channel_servers.console") + beside
        replay_done = killed = False
        acks = 0
        while True:
            try:
                frame = await session.receive()
            except _GONE:
                break
            if isinstance(frame, Queued):
                t.queued.add(frame.id)
                t.duplicate_acks += frame.duplicate
                replay_done = True
            elif isinstance(frame, Reply):
                t.replies.append(frame)
                if frame.reply_to == SENTINEL:
                    return
                if frame.reply_to is not None:
                    t.answered.add(frame.reply_to)
            self._touch()
            # Never during the replay of kept replies: the console writes each one before it marks it
            # sent, with no state in between, so a kill there shows that reply again on the next Hello.
            if kill_at is None or killed or not replay_done or t.settled() < kill_at.settled:
                continue
            acks += isinstance(frame, Queued)
            if self._due(kill_at, frame, acks):
                orch.process.send_signal(signal.SIGKILL)
                for pid in beside:
                    os.kill(pid, signal.SIGKILL)
                killed = True
                t.kills += 1
        if not killed:
            raise AssertionError("the console closed the chat without being killed; log:\n" + orch.log())
        await wait_exited(console, EXIT_TIMEOUT_S)
