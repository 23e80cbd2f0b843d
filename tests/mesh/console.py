"""The operator's side of the console socket, for scenarios that answer approvals."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio

from orchestrator.cli.chat_loop import ChatSession
from orchestrator.sockets import console_path
from shared import unix_socket
from shared.protocol.console_wire import Hello

WAIT_S = 30.0
F = TypeVar("F")


@asynccontextmanager
async def operator(state_dir: Path, chat_id: str = "operator") -> AsyncIterator[ChatSession]:
    stream = await unix_socket.connect(console_path(state_dir))
    async with stream:
        session = ChatSession(stream)
        await session.send(Hello(chat_id=chat_id))
        yield session


async def next_frame(session: ChatSession, kind: type[F], timeout: float = WAIT_S) -> F:
    """The next frame of ``kind``, skipping others."""
    with anyio.fail_after(timeout):
        while True:
            frame: Any = await session.receive()
            if isinstance(frame, kind):
                return frame
