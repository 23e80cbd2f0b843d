"""Session history when the memory server was unreachable as a chat began: the exchange is stored
once it is back, merged after what the server already held."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from orchestrator.intake.sessions import SessionHistory
from orchestrator.llm import AssistantMessage, UserMessage
from orchestrator.mesh import ServerConnection
from orchestrator.mesh.errors import ServerUnavailable
from shared.protocol.memory.sessions import (
    SessionAppendRequest,
    SessionAppendResult,
    SessionHistoryRequest,
    SessionHistoryResult,
    SessionResolveRequest,
    SessionResolveResult,
    StoredEntry,
)

pytestmark = pytest.mark.anyio


def _text(message: object) -> str | None:
    if isinstance(message, UserMessage):
        return message.content
    assert isinstance(message, AssistantMessage)
    return message.text


class FlakyMemory:
    """Answers the three session requests like the memory server; down until ``up`` is set."""

    def __init__(self) -> None:
        self.up = False
        self.appended: list[tuple[int, list[str]]] = []

    async def request(self, request: Any, result_type: type[Any], *, timeout: float) -> Any:
        if not self.up:
            raise ServerUnavailable("server 'memory' is not connected")
        if isinstance(request, SessionResolveRequest):
            return SessionResolveResult(session_id=7, created=False, entries=2)
        if isinstance(request, SessionHistoryRequest):
            return SessionHistoryResult(
                entries=[
                    StoredEntry(id=1, role="user", content="earlier question", at=1.0),
                    StoredEntry(id=2, role="assistant", content="earlier answer", at=2.0),
                ]
            )
        assert isinstance(request, SessionAppendRequest)
        params = request.params
        self.appended.append((params.session_id, [e.content for e in params.entries]))
        return SessionAppendResult(appended=len(params.entries), duplicates=0, trimmed=0, consolidated=False)


async def test_an_exchange_is_stored_once_the_memory_server_is_back() -> None:
    memory = FlakyMemory()
    sessions = SessionHistory("nexo", 10, cast(ServerConnection, memory))
    assert await sessions.history("console|chat_id=op") == []
    memory.up = True
    await sessions.record("console|chat_id=op", "new question", "new answer", turn_id="console:m1")
    assert memory.appended == [(7, ["new question", "new answer"])]
    texts = [_text(m) for m in await sessions.history("console|chat_id=op")]
    assert texts == ["earlier question", "earlier answer", "new question", "new answer"]


async def test_an_exchange_stays_in_process_while_the_memory_server_is_down() -> None:
    memory = FlakyMemory()
    sessions = SessionHistory("nexo", 10, cast(ServerConnection, memory))
    await sessions.record("console|chat_id=op", "question", "answer", turn_id="console:m1")
    assert memory.appended == []
    history = await sessions.history("console|chat_id=op")
    assert [type(m) for m in history] == [UserMessage, AssistantMessage]


class SlowMemory(FlakyMemory):
    """Up, but each request waits until ``go`` is set (the memory server busy with its disk)."""

    def __init__(self) -> None:
        super().__init__()
        self.up = True
        self.go = anyio.Event()
        self.resolves = 0

    async def request(self, request: Any, result_type: type[Any], *, timeout: float) -> Any:
        if isinstance(request, SessionResolveRequest):
            self.resolves += 1
        await self.go.wait()
        return await super().request(request, result_type, timeout=timeout)


async def test_a_remembered_exchange_is_in_the_history_before_its_write_lands() -> None:
    memory = SlowMemory()
    sessions = SessionHistory("nexo", 10, cast(ServerConnection, memory))
    key = "console|chat_id=op"
    async with anyio.create_task_group() as tg:
        sessions.remember(key, "new question", "new answer")
        # The write and the next message's history both need the durable past: it is read once.
        tg.start_soon(lambda: sessions.store(key, "new question", "new answer", turn_id="console:m1"))
        history: list[list[str | None]] = []

        async def next_message() -> None:
            history.append([_text(m) for m in await sessions.history(key)])

        tg.start_soon(next_message)
        await anyio.wait_all_tasks_blocked()
        memory.go.set()
    assert memory.resolves == 1
    assert history == [["earlier question", "earlier answer", "new question", "new answer"]]
    assert memory.appended == [(7, ["new question", "new answer"])]
