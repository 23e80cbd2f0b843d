"""The fork server's template, forked from this very process before its event loop starts.

The orchestrator imports most of what the built-in servers need anyway (mcp, pydantic, anyio). A
template forked from it, after it has imported the rest (``shared.forkserver.PRELOAD``), shares all
of those pages with it, where a spawned template (``python -m shared.forkserver``) imports and holds
its own copy. A fork copies only the calling thread and leaves an event loop's state half-shared, so
this is done only where neither exists: ``nexo run`` and ``nexo agent run`` call it after reading
their config and before ``anyio.run`` (and before logging is configured, so the template's logging is
the interpreter's default, as a spawned one's is). Anywhere else :func:`fork_template` declines, with
the reason, and the template is spawned at the first fork request as before.

Still before the event loop, :func:`fork_children` asks the forked template for the built-in
servers at once, blocking, so they start while this process imports and builds the rest of itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import anyio

from shared import forkserver

READY_TIMEOUT_S = 10.0
"""A forked template has nothing to import: it is ready as soon as it has dropped what it inherited."""
MAX_MESSAGE = 1 << 16


class ForkedTemplate:
    """The template as a child of this process: waited for and killed through its pidfd."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self._pidfd: int | None = pidfd
        self._returncode: int | None = None

    @property
    def returncode(self) -> int | None:
        """None while it runs; reaps it (no zombie is left) once it has ended."""
        if self._returncode is None and self._pidfd is not None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self._reaped(status)
        return self._returncode

    async def wait(self) -> int:
        while (code := self.returncode) is None:
            assert self._pidfd is not None
            await anyio.wait_readable(self._pidfd)
        return code

    def kill(self) -> None:
        if self._pidfd is None:
            return
        try:
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        except ProcessLookupError:
            return

    def reap(self) -> None:
        """Wait for it to end (kill it first), blocking: only before the event loop starts."""
        if self._returncode is None:
            self._reaped(os.waitpid(self.pid, 0)[1])

    def _reaped(self, status: int) -> None:
        self._returncode = os.waitstatus_to_exitcode(status)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


@dataclass(frozen=True, slots=True)
class Preforked:
    process: ForkedTemplate
    control: socket.socket
    """Our end of the template's ``SOCK_SEQPACKET`` socket."""
    interpreter: dict[str, str]
    """The ``PYTHON*`` variables this interpreter started with, which the template shares."""


def unsafe_to_fork() -> str | None:
    """Why this process cannot fork the template now, or None when it can."""
    if not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"):
        return "this system lacks fork with pidfds (Linux 5.3 or later)"
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # none: the case this is for
    else:
        return "an event loop is running in this process"
    threads = threading.active_count()
    try:
        threads = max(threads, len(list(Path("/proc/self/task").iterdir())))
    except OSError:
        return "/proc/self/task cannot be read to count this process's threads"
    if threads != 1:
        return f"this process runs {threads} threads, which a forked template would lack"
    return None


def fork_template() -> Preforked | str:
    """A template forked from this process (see the module's docstring), or why not."""
    why = unsafe_to_fork()
    if why is not None:
        return why
    try:
        forkserver.preload()
    except (ImportError, RuntimeError) as exc:
        return f"preloading failed ({type(exc).__name__}: {exc})"
    interpreter = {key: value for key, value in os.environ.items() if key.startswith("PYTHON")}
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # what is buffered now would be written twice, once by each process
    try:
        pid = os.fork()
    except OSError as exc:
        ours.close()
        theirs.close()
        return f"fork failed ({exc})"
    if pid == 0:
        forkserver.serve_forked(theirs.fileno())  # never returns
    theirs.close()
    process = ForkedTemplate(pid, os.pidfd_open(pid))
    # Until it says ready the child still holds copies of this process's descriptors (the state
    # directory's lock among them): nothing may go on as if they were ours alone.
    ours.settimeout(READY_TIMEOUT_S)
    try:
        greeting = json.loads(ours.recv(MAX_MESSAGE) or b"{}")
    except (OSError, ValueError) as exc:
        greeting = {"failed": f"{type(exc).__name__}: {exc}"}
    if greeting.get("ready") != pid:
        ours.close()
        process.kill()
        process.reap()
        return f"the forked template did not get ready ({greeting.get('failed', 'it exited')})"
    ours.setblocking(False)
    return Preforked(process, ours, interpreter)


@dataclass(frozen=True, slots=True)
class EarlyChild:
    """A server forked by the template before the event loop started, waiting to be adopted."""

    pid: int
    pidfd: int
    stdin: int
    """Our end of the child's stdin."""
    stdout: int
    """Our end of the child's stdout."""

    def close(self) -> None:
        """Let it go unadopted: its stdin closes, so it ends as a server does at end of input."""
        for fd in (self.stdin, self.stdout, self.pidfd):
            os.close(fd)


@dataclass(slots=True)
class EarlyChildren:
    started: list[EarlyChild | None]
    """One per request, in order; None where the template answered with an error."""
    exited: dict[int, int]
    """Exit codes the template reported meanwhile, by process id."""
    errors: list[str]


def fork_children(preforked: Preforked, requests: list[dict[str, object]], stderr: int) -> EarlyChildren:
    """Ask the template for one child per request now, blocking: only before the event loop starts.

    Each child gets a pipe for stdin and one for stdout (our ends are in the answer) and ``stderr``.
    Raises OSError (or ValueError for an answer that is not JSON) when the template does not answer;
    the caller then stops using the template, and closing the socket ends the children made so far.
    """
    control = preforked.control
    found = EarlyChildren([], {}, [])
    control.settimeout(READY_TIMEOUT_S)
    try:
        for request in requests:
            found.started.append(_fork_one(control, request, stderr, found))
    except BaseException:
        for child in found.started:
            if child is not None:
                child.close()
        raise
    finally:
        control.setblocking(False)
    return found


def _fork_one(
    control: socket.socket, request: dict[str, object], stderr: int, found: EarlyChildren
) -> EarlyChild | None:
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    try:
        socket.send_fds(control, [json.dumps(request).encode()], [stdin_read, stdout_write, stderr])
        while True:
            data, fds, _flags, _address = socket.recv_fds(control, MAX_MESSAGE, 1)
            if not data:
                raise ConnectionResetError("the template exited")
            reply = json.loads(data)
            if "forked" in reply and fds:
                os.set_inheritable(fds[0], False)
                return EarlyChild(reply["forked"], fds[0], stdin_write, stdout_read)
            for fd in fds:
                os.close(fd)
            if "exited" in reply:
                found.exited[reply["exited"]] = reply["returncode"]
                continue
            found.errors.append(str(reply.get("error", reply)))
            os.close(stdin_write)
            os.close(stdout_read)
            return None
    except BaseException:
        os.close(stdin_write)
        os.close(stdout_read)
        raise
    finally:
        os.close(stdin_read)
        os.close(stdout_write)
