"""The fork server's template, forked from this very process before its event loop starts.

The orchestrator imports most of what the built-in servers need anyway (mcp, pydantic, anyio). A
template forked from it shares those pages with it, where a spawned template (``python -m
shared.forkserver``) imports and holds its own copy. The template imports the rest
(``shared.forkserver.PRELOAD``) itself, after the fork, on the other core, while this process
imports the rest of itself. A fork copies only the calling thread and leaves an event loop's state
half-shared, so this is done only where neither exists: ``nexo run`` and ``nexo agent run`` call it
after reading their config and before ``anyio.run`` (and before logging is configured, so the
template's logging is the interpreter's default, as a spawned one's is). Anywhere else
:func:`fork_template` declines, with the reason, and the template is spawned at the first fork
request as before.

Still before the event loop, :func:`ask_for_children` asks the forked template for the built-in
servers at once without waiting for its answers, so they start as soon as it has preloaded, while
this process goes on; the answers are read in the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
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


def fork_template(shared: Sequence[str] = ()) -> Preforked | str:
    """A template forked from this process (see the module's docstring), or why not.

    ``shared``: modules of ``shared.forkserver.PRELOAD`` this process imports anyway, imported here
    before the fork so that their pages are shared with the template, not held twice.
    """
    try:
        for name in shared:
            importlib.import_module(name)
    except ImportError as exc:
        return f"preloading failed ({type(exc).__name__}: {exc})"
    why = unsafe_to_fork()
    if why is not None:
        return why
    # Freezing moves what is imported so far out of this process's collections too, which would
    # otherwise write to every object's header and so copy the pages it shares with the template.
    gc.freeze()
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
    """Our ends of the pipes of a server asked for before the event loop started; the template's
    answer (its pid and pidfd) is read in the event loop, when a connection adopts it."""

    stdin: int
    """Our end of the child's stdin."""
    stdout: int
    """Our end of the child's stdout."""

    def close(self) -> None:
        """Let it go unadopted: its stdin closes, so it ends as a server does at end of input."""
        for fd in (self.stdin, self.stdout):
            os.close(fd)


def ask_for_children(
    preforked: Preforked, requests: list[dict[str, object]], stderr: int
) -> list[EarlyChild]:
    """Ask the template for one child per request, without waiting for it: only before the event
    loop starts. The template answers each in order (``forked`` or ``error``) once it has preloaded;
    the answers wait in the socket until the event loop reads them.

    Each child gets a pipe for stdin and one for stdout (our ends are returned) and ``stderr``.
    Raises OSError when a request cannot be sent; the caller then stops using the template, and
    closing the socket ends whatever it started.
    """
    control = preforked.control
    asked: list[EarlyChild] = []
    control.settimeout(READY_TIMEOUT_S)
    try:
        for request in requests:
            asked.append(_ask_one(control, request, stderr))
    except BaseException:
        for child in asked:
            child.close()
        raise
    finally:
        control.setblocking(False)
    return asked


def _ask_one(control: socket.socket, request: dict[str, object], stderr: int) -> EarlyChild:
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    try:
        # The message in flight holds the child's ends: ours can close at once.
        socket.send_fds(control, [json.dumps(request).encode()], [stdin_read, stdout_write, stderr])
    except BaseException:
        os.close(stdin_write)
        os.close(stdout_read)
        raise
    finally:
        os.close(stdin_read)
        os.close(stdout_write)
    return EarlyChild(stdin_write, stdout_read)


def early_answers(control: socket.socket, count: int, timeout: float) -> tuple[list[int], int]:
    """Read the template's answers to ``count`` requests made by :func:`ask_for_children`, within
    ``timeout``: the pidfds of the children it forked, and how many requests were answered (forked
    or refused). Blocking: only outside an event loop."""
    pidfds: list[int] = []
    answered = 0
    deadline = time.monotonic() + timeout
    while answered < count:
        ready, _, _ = select.select([control], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        try:
            data, fds, _flags, _address = socket.recv_fds(control, MAX_MESSAGE, 1)
        except (BlockingIOError, ConnectionResetError):
            continue  # reset: it exited with requests unread; what it sent before still follows
        except OSError:
            break
        if not data:
            break
        message = json.loads(data)
        if "forked" in message and fds:
            pidfds.append(fds[0])
        else:
            for fd in fds:
                os.close(fd)
        answered += "forked" in message or "error" in message
    return pidfds, answered


def wait_ended(pidfds: list[int], timeout: float) -> None:
    """Wait until these processes have ended, up to ``timeout``; kill any still there, then close
    the pidfds. Blocking: only outside an event loop."""
    waiting = _still_running(set(pidfds), timeout)
    for pidfd in waiting:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    _still_running(waiting, timeout)
    for pidfd in pidfds:
        os.close(pidfd)


def _still_running(pidfds: set[int], timeout: float) -> set[int]:
    """Those of ``pidfds`` whose process has not ended within ``timeout``."""
    deadline = time.monotonic() + timeout
    while pidfds and (left := deadline - time.monotonic()) > 0:
        ended, _, _ = select.select(list(pidfds), [], [], left)
        pidfds = pidfds - set(ended)
    return pidfds


def end_early(preforked: Preforked | None, children: list[EarlyChild], unanswered: int, wait: float) -> None:
    """End a forked template and the servers asked of it early, and wait for them. Blocking: only
    outside an event loop (or in a worker thread).

    The early servers' stdin is closed first: a server already forked ends at the end of its
    input, and one the template has not forked yet is refused (it forks nothing whose stdin has no
    writer left). The ``unanswered`` answers are read for up to ``wait``; a template still
    preloading by then is killed, and what it answered before it died is still read, so every
    server it forked is waited for. One still there after ``wait`` is killed.
    """
    for child in children:
        child.close()
    pidfds: list[int] = []
    if preforked is not None:
        if unanswered:
            pidfds, answered = early_answers(preforked.control, unanswered, wait)
            unanswered -= answered
        preforked.process.kill()
        preforked.process.reap()
        if unanswered:
            pidfds += early_answers(preforked.control, unanswered, 0.0)[0]  # sent before it died
        preforked.control.close()
    wait_ended(pidfds, wait)
