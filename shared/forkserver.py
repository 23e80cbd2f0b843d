"""The fork server: one template process that imports what every built-in server needs, then forks them.

Eight interpreters that each import mcp, pydantic, anyio and starlette hold eight private copies of
the same modules. The orchestrator starts this template once (``python -m shared.forkserver FD``);
it imports the common modules, freezes them out of the garbage collector's reach (so no collection
writes to their pages) and then forks one child per built-in server on request. A child shares the
template's pages copy-on-write and pays only for what its own server adds.

The wire, over the ``SOCK_SEQPACKET`` socket whose descriptor is the first argument:

- template -> orchestrator, once: ``{"ready": PID}`` (or ``{"failed": REASON}`` and exit 1);
- orchestrator -> template: ``{"module", "args", "env", "cwd", "title"}`` with three descriptors
  (the child's stdin, stdout, stderr) attached;
- template -> orchestrator: ``{"forked": PID}`` with a pidfd of the child attached, so signals reach
  exactly that process even after it is reaped, or ``{"error": REASON}``;
- template -> orchestrator: ``{"exited": PID, "returncode": CODE}`` when a child ends (negative:
  killed by that signal, as ``subprocess`` reports it).

The template starts no thread, event loop or database connection: a fork copies only the calling
thread, so anything of the kind would be broken in every child. End of file on the socket means
the orchestrator is gone: the template exits and its children, whose stdin closes too, follow.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import threading
from typing import Any

from shared.forkchild import become

PRELOAD = (
    "anyio._backends._asyncio",
    "aiosqlite",
    "argparse",
    "pydantic_settings",
    "rich.logging",
    "shared.db",
    "shared.events",
    "shared.hosting",
    "shared.protocol.control",
    "shared.protocol.events",
    "shared.protocol.memory",
    "shared.protocol.policy",
    "shared.protocol.storage",
    "shared.secrets",
    "shared.serverkit",
    "shared.settings",
)
"""What every built-in server imports (mcp, pydantic, anyio, starlette, uvicorn come with these)."""
MAX_MESSAGE = 1 << 20
CHILD_FDS = 3


def preload() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    if threading.active_count() != 1:
        names = ", ".join(t.name for t in threading.enumerate())
        raise RuntimeError(f"a preloaded module started threads ({names}); forked children would lack them")
    gc.collect()
    gc.freeze()


def _send(control: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(control, [data], fds)
    else:
        control.send(data)


def _fork(control: socket.socket, request: dict[str, Any], fds: list[int], closing: list[int]) -> None:
    try:
        if len(fds) != CHILD_FDS:
            raise ValueError(f"a fork request carries {CHILD_FDS} descriptors, not {len(fds)}")
        pid = os.fork()
        if pid == 0:
            become(request, fds, closing)  # never returns
        pidfd = os.pidfd_open(pid)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _send(control, {"error": f"{type(exc).__name__}: {exc}"})
        return
    finally:
        for fd in fds:
            os.close(fd)
    try:
        _send(control, {"forked": pid}, [pidfd])
    finally:
        os.close(pidfd)


def _reap(control: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(control, {"exited": pid, "returncode": os.waitstatus_to_exitcode(status)})


def serve(control: socket.socket) -> int:
    wake_read, wake_write = os.pipe()
    for fd in (wake_read, wake_write):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
    closing = [control.fileno(), wake_read, wake_write]
    with selectors.DefaultSelector() as selector:
        selector.register(control, selectors.EVENT_READ)
        selector.register(wake_read, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj == wake_read:
                    os.read(wake_read, 4096)
                    _reap(control)
                    continue
                data, fds, _flags, _address = socket.recv_fds(control, MAX_MESSAGE, CHILD_FDS)
                if not data:
                    return 0
                _fork(control, json.loads(data), fds, closing)


def main(argv: list[str]) -> int:
    if not argv or not argv[0].isdigit():
        print("usage: python -m shared.forkserver CONTROL_FD (started by the orchestrator)", file=sys.stderr)
        return 2
    control = socket.socket(fileno=int(argv[0]))
    try:
        try:
            preload()
        except (ImportError, RuntimeError) as exc:
            _send(control, {"failed": f"{type(exc).__name__}: {exc}"})
            return 1
        _send(control, {"ready": os.getpid()})
        return serve(control)
    except (BrokenPipeError, ConnectionResetError):
        return 0  # the orchestrator is gone, and with it anyone to report to


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
