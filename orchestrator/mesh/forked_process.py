"""A server forked by the fork server's template, as the orchestrator sees it: a pid and a pidfd."""

from __future__ import annotations

import os
import select
import signal

import anyio


class ForkedProcess:
    """A child of the template: signalled through its pidfd, its exit seen on the pidfd."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self.pidfd = pidfd
        self.returncode: int | None = None
        """Set when the template reports the exit (None if the template went away first)."""
        self.reported = anyio.Event()
        """Set with ``returncode``."""

    def alive(self) -> bool:
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        return not poller.poll(0)

    async def wait(self, timeout: float) -> bool:
        """Whether the process ended within ``timeout``."""
        with anyio.move_on_after(timeout):
            await anyio.wait_readable(self.pidfd)
        return not self.alive()

    def kill_group(self, signum: signal.Signals) -> None:
        """Signal the child's whole session (it leads its own process group, as a spawn would)."""
        if not self.alive():
            return
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            return
        except PermissionError:
            signal.pidfd_send_signal(self.pidfd, signum)

    def close(self) -> None:
        os.close(self.pidfd)
