"""Which process is in the middle of a send: file locks beside the channel's database.

A server whose host went away finishes the sends it began before it exits, while the next server
on the same database may already be starting. So each process holds a shared ``flock`` on
``<database>.sending`` while any of its sends is between its claim and its recorded outcome, and
``recover()`` takes the exclusive lock first: the entries it then finds ``sending`` belong to a
process that died, never to a predecessor still finishing. The kernel drops a dead process's locks.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread

logger = logging.getLogger("nexo.channel")

RECOVER_WAIT_S = 90.0
"""How long a start waits for another process's sends before it counts them as interrupted."""


def _try(fd: int, operation: int) -> bool:
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


async def _lock(fd: int, operation: int) -> None:
    """Without a thread when the lock is free; a thread left blocked by a cancel is harmless: the
    lock it may still get goes away when the file is closed."""
    if not _try(fd, operation):
        await anyio.to_thread.run_sync(fcntl.flock, fd, operation, abandon_on_cancel=True)


class InFlight:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._sending = 0

    def _open(self) -> int:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.fchmod(fd, 0o600)
        return fd

    @asynccontextmanager
    async def sending(self) -> AsyncIterator[None]:
        """Held around each send from its claim to its recorded outcome."""
        if self._sending == 0:
            if self._fd is None:
                self._fd = self._open()
            await _lock(self._fd, fcntl.LOCK_SH)
        self._sending += 1
        try:
            yield
        finally:
            self._sending -= 1
            if self._sending == 0 and self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    @asynccontextmanager
    async def recovering(self, name: str) -> AsyncIterator[None]:
        """Held while ``sending`` entries are made ``uncertain``: no other process is mid-send then
        (after ``RECOVER_WAIT_S`` it goes ahead anyway, and says so)."""
        fd = self._open()
        try:
            if not _try(fd, fcntl.LOCK_EX):
                logger.info("%s: waiting for another process to finish its sends", name)
                with anyio.move_on_after(RECOVER_WAIT_S) as waiting:
                    await _lock(fd, fcntl.LOCK_EX)
                if waiting.cancelled_caught:
                    logger.warning(
                        "%s: another process is still sending after %.0f s; its sends count as interrupted",
                        name,
                        RECOVER_WAIT_S,
                    )
            yield
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
