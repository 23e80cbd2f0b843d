"""The Unix socket where ``nexo chat`` clients connect, and delivery to them."""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from shared import unix_socket
from shared.db import StorageFull
from shared.private import make_private_dirs
from shared.protocol.console_wire import (
    MAX_FRAME_BYTES,
    Error,
    FrameError,
    Hello,
    Say,
    ServerFrame,
    decode_client,
    encode,
)
from shared.unix_socket import UnixStream

logger = logging.getLogger("nexo.console")

OnSay = Callable[["ChatClient", Say], Awaitable[None]]
OnHello = Callable[["ChatClient"], Awaitable[None]]


SEND_TIMEOUT_S = 5.0
"""How long a chat may leave a frame unread before it is disconnected."""


class ConsoleInUse(Exception):
    """Another console server already listens on this socket."""


class ChatClient:
    def __init__(self, stream: UnixStream) -> None:
        self.stream = stream
        self.chat_id = "operator"
        self._lock = anyio.Lock()

    async def send(self, frame: ServerFrame) -> bool:
        """False when the chat is gone or stopped reading (e.g. suspended): it is then disconnected,
        so one stuck terminal never holds up replies to the others; what it missed stays queued."""
        try:
            with anyio.fail_after(SEND_TIMEOUT_S):
                async with self._lock:
                    await self.stream.send(encode(frame))
            return True
        except TimeoutError:
            await self.stream.aclose()
            return False
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            return False


class Hub:
    def __init__(self, path: Path, *, on_hello: OnHello, on_say: OnSay) -> None:
        self.path = path
        self._on_hello = on_hello
        self._on_say = on_say
        self.clients: list[ChatClient] = []
        self._chat_locks: dict[str, anyio.Lock] = {}

    def _claim_socket(self) -> None:
        make_private_dirs(self.path.parent)
        if self.path.exists():
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(self.path))
            except OSError:
                self.path.unlink()  # stale socket from a process that died
            else:
                raise ConsoleInUse(
                    f"another console server is listening on {self.path}; stop it or use another state_dir"
                )
            finally:
                probe.close()

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self._claim_socket()
        # The socket's directory is private (0700), so nobody else can reach it before the chmod.
        listener = await unix_socket.listen(self.path, mode=0o600)
        task_status.started()
        try:
            async with listener:
                await listener.serve(self._handle)
        finally:
            with contextlib.suppress(OSError):
                self.path.unlink()

    async def _handle(self, stream: UnixStream) -> None:
        client = ChatClient(stream)
        reader = BufferedByteReceiveStream(stream)
        try:
            while True:
                try:
                    line = await reader.receive_until(b"\n", MAX_FRAME_BYTES)
                except (
                    anyio.IncompleteRead,
                    anyio.EndOfStream,
                    anyio.BrokenResourceError,
                    anyio.ClosedResourceError,  # closed by send() because the chat stopped reading
                ):
                    return
                except anyio.DelimiterNotFound:
                    await client.send(Error(message=f"frame larger than {MAX_FRAME_BYTES} bytes"))
                    return
                try:
                    frame = decode_client(line)
                except FrameError as exc:
                    await client.send(Error(message=f"bad frame: {exc}"))
                    continue
                try:
                    if isinstance(frame, Hello):
                        await self._hello(client, frame.chat_id)
                    else:
                        await self._on_say(client, frame)
                except StorageFull as exc:
                    # Refused, not lost: the chat is told and the console keeps serving.
                    await client.send(Error(message=str(exc)))
        finally:
            if client in self.clients:
                self.clients.remove(client)
            await stream.aclose()

    def chat_lock(self, chat_id: str) -> anyio.Lock:
        """Held while a chat's queued replies are flushed and while a reply is sent to it, so a new
        reply never overtakes an older queued one."""
        return self._chat_locks.setdefault(chat_id, anyio.Lock())

    async def _hello(self, client: ChatClient, chat_id: str) -> None:
        async with self.chat_lock(chat_id):
            client.chat_id = chat_id
            try:
                await self._on_hello(client)
            finally:
                # Only now does the chat take live replies: what was queued before has gone first.
                if client not in self.clients:
                    self.clients.append(client)

    async def deliver(self, chat_id: str, frame: ServerFrame) -> int:
        reached = 0
        for client in list(self.clients):
            if client.chat_id == chat_id and await client.send(frame):
                reached += 1
        return reached

    async def broadcast(self, frame: ServerFrame) -> int:
        reached = 0
        for client in list(self.clients):
            if await client.send(frame):
                reached += 1
        return reached


class PendingApprovals:
    """Request ids the orchestrator asked about; only these can be answered from the console."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl_s
        self._clock = clock
        self._expires: dict[str, float] = {}
        self.prompts: dict[str, ServerFrame] = {}

    def add(self, request_id: str, prompt: ServerFrame) -> None:
        self._expires[request_id] = self._clock() + self._ttl
        self.prompts[request_id] = prompt

    def take(self, request_id: str) -> bool:
        self._expire()
        if request_id not in self._expires:
            return False
        del self._expires[request_id]
        del self.prompts[request_id]
        return True

    def open(self) -> list[ServerFrame]:
        self._expire()
        return list(self.prompts.values())

    def _expire(self) -> None:
        now = self._clock()
        for request_id in [r for r, t in self._expires.items() if t <= now]:
            del self._expires[request_id]
            del self.prompts[request_id]
