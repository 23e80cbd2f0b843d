"""The fork server: one template process that imports what every built-in server needs, then forks them.

Eight interpreters that each import mcp, pydantic, anyio and starlette hold eight private copies of
the same modules. The orchestrator makes this template once. Where it can, it forks the template
from its own process (:func:`serve_forked`), once it has imported the MCP SDK and before its event
loop or any thread exists, so the orchestrator, the template and every server share one copy of
those pages; the template then imports the rest (``PRELOAD``) on its own core while the orchestrator
goes on with its own. Otherwise it starts the template as its own command (``python -m
shared.forkserver FD``), which imports them again. Either way the template freezes the modules out
of the garbage collector's reach (so no collection writes to their pages) and then forks one child
per built-in server on request. A child shares the template's pages copy-on-write and pays only for
what its own server adds.

The wire, over the ``SOCK_SEQPACKET`` socket whose descriptor is the first argument:

- template -> orchestrator, once: ``{"ready": PID}`` (or ``{"failed": REASON}`` and exit 1); a
  forked template says ready as soon as it has dropped what it inherited, then preloads, and says
  ``{"failed": REASON}`` (and exits 1) if that fails; requests sent meanwhile wait in the socket;
- orchestrator -> template: ``{"module", "args", "env", "cwd", "title"}`` with three descriptors
  (the child's stdin, stdout, stderr) attached;
- template -> orchestrator: ``{"forked": PID}`` with a pidfd of the child attached, so signals reach
  exactly that process even after it is reaped, or ``{"error": REASON}``; a request whose stdin
  has no writer left (the orchestrator stopped before the template got to it) is answered with an
  error and not forked, so a stop never leaves a server starting that nobody waits for;
- template -> orchestrator: ``{"exited": PID, "returncode": CODE}`` when a child ends (negative:
  killed by that signal, as ``subprocess`` reports it).

The template starts no thread, event loop or database connection: a fork copies only the calling
thread, so anything of the kind would be broken in every child. End of file on the socket means
the orchestrator is gone: the template exits and its children, whose stdin closes too, follow.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import io
import json
import logging
import os
import select
import selectors
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn

from shared.forkchild import become, set_title

PRELOAD = (
    "anyio._backends._asyncio",
    "aiosqlite",
    "argparse",
    "pydantic_settings",
    "rich.console",
    "rich.logging",
    "shared.db",
    "shared.events",
    "shared.hosting.main",
    "shared.protocol.audit.methods",
    "shared.protocol.channel",
    "shared.protocol.control",
    "shared.protocol.cron",
    "shared.protocol.events",
    "shared.protocol.memory.admin",
    "shared.protocol.memory.methods",
    "shared.protocol.memory.sessions",
    "shared.protocol.pairing",
    "shared.protocol.policy",
    "shared.protocol.storage",
    "shared.secrets",
    "shared.serverkit",
    "shared.settings",
)
"""What every built-in server imports (mcp, pydantic, anyio, starlette, uvicorn come with these), and
the wire models of the audit, cron, pairing and channel servers, which the daemon imports too: built
once before the fork instead of once in the daemon and again in each of those servers (15 to 25 ms
each in a quiet process, their pydantic models)."""
MAX_MESSAGE = 1 << 20
CHILD_FDS = 3
TITLE = "-m shared.forkserver"
"""What the template's command line shows after the interpreter's path, however it was made."""
COMM_LENGTH = 15
"""The kernel keeps 15 bytes of a process's name (``/proc/PID/comm``)."""


def preload() -> None:
    # Collection is off while the imports run (a template forked from `nexo run` inherits it off;
    # one started as a command turns it off here) and on again, after the freeze, before any
    # server is forked.
    gc.disable()
    try:
        for name in PRELOAD:
            importlib.import_module(name)
        if threading.active_count() != 1:
            names = ", ".join(t.name for t in threading.enumerate())
            raise RuntimeError(
                f"a preloaded module started threads ({names}); forked children would lack them"
            )
        # No collection first: it would walk every object just imported (a tenth of a second on the
        # way to the first server) to free next to nothing, and the holes it left would be filled by
        # the children's own objects, copying the pages they share (see the docs of gc.freeze).
        gc.freeze()
    finally:
        gc.enable()


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
        if _writer_gone(fds[0]):
            _send(
                control, {"error": "not started: its stdin was closed first (the orchestrator is stopping)"}
            )
            return
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


def _writer_gone(stdin: int) -> bool:
    """Whether every writer of the pipe ``stdin`` reads has closed it (a hang-up, seen at once)."""
    poller = select.poll()
    poller.register(stdin, select.POLLIN)
    return any(events & select.POLLHUP for _fd, events in poller.poll(0))


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


def serve_forked(control_fd: int) -> NoReturn:
    """The template's life in a child just forked from the orchestrator; it never returns.

    The child holds a copy of everything the orchestrator had open (the state directory's lock,
    the control socket, log files, a terminal): it keeps only stderr and ``control_fd``, and
    becomes what ``python -m shared.forkserver`` would have been: its own session, stdin and stdout
    on ``/dev/null``, the interpreter's default signal handling and its own command line; then it
    preloads. Nothing of the orchestrator's call stack runs again here: every path ends in
    ``os._exit``.
    """
    code = 1
    try:
        control = _detach_template(control_fd)
        try:
            _send(control, {"ready": os.getpid()})
            code = _preload_then_serve(control)
        except (BrokenPipeError, ConnectionResetError):
            code = 0
    except BaseException:  # noqa: BLE001 -- reported as the interpreter would, and never returned to the orchestrator
        sys.excepthook(*sys.exc_info())
    finally:
        os._exit(code)


def _preload_then_serve(control: socket.socket) -> int:
    """Import what the servers share here, on the template's own core, while the orchestrator goes
    on importing the rest of itself; fork requests sent meanwhile wait in the socket."""
    try:
        preload()
    except (ImportError, RuntimeError) as exc:
        _send(control, {"failed": f"preloading failed ({type(exc).__name__}: {exc})"})
        return 1
    return serve(control)


def _detach_template(control_fd: int) -> socket.socket:
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    os.closerange(3, control_fd)
    os.closerange(control_fd + 1, os.sysconf("SC_OPEN_MAX"))
    _fresh_stdio()
    _default_signals()
    _own_exit_handlers()
    executable = Path(sys.executable)
    set_title([str(executable), *TITLE.split()])
    _set_comm(executable.name)
    sys.argv = [TITLE]
    return socket.socket(fileno=control_fd)


def _fresh_stdio() -> None:
    """``sys.stdin``, ``sys.stdout`` and ``sys.stderr`` over descriptors 0, 1 and 2, as a fresh
    interpreter makes them for pipes, whatever the orchestrator had put in their place (a test
    runner's capture, a wrapper), with the encoding and error handling it started with."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        original = getattr(sys, f"__{name}__", None)
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        binary = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        stream = io.TextIOWrapper(
            binary,
            encoding=getattr(original, "encoding", None) or "utf-8",
            errors=getattr(original, "errors", None) or ("backslashreplace" if fd == 2 else "strict"),
            line_buffering=fd == 2,
            write_through=bool(getattr(original, "write_through", False)),
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _own_exit_handlers() -> None:
    """Forget the orchestrator's exit handlers (a temporary directory's cleanup among them), which
    every server would otherwise run when it exits; keep the one a fresh interpreter has."""
    atexit._clear()
    atexit.register(logging.shutdown)


def _default_signals() -> None:
    """Undo what the orchestrator's Python code installed: Ctrl-C raises KeyboardInterrupt again,
    other handlers go back to the default. Dispositions set before the interpreter started (an
    ignored SIGHUP under nohup, SIGPIPE ignored by Python itself) stay, as a spawn keeps them."""
    signal.set_wakeup_fd(-1)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    for signum in signal.valid_signals():
        handler = signal.getsignal(signum)
        if not callable(handler) or handler is signal.default_int_handler:
            continue
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)


def _set_comm(name: str) -> None:
    """The short name ``ps`` and ``top`` show: the interpreter's, as a spawned template would have."""
    try:
        Path("/proc/self/comm").write_text(name[:COMM_LENGTH])
    except OSError:
        return


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
