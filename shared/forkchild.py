"""What a child of the fork server does: become the process a plain spawn would have started.

A spawned ``python -m servers.time`` gets its own session, the pipes its parent made, the
environment and working directory it was given, ``sys.argv`` and ``sys.path[0]`` as ``-m`` sets
them, and exits with the code its ``__main__`` chose. The forked child sets each of these itself
and rewrites its command line in place, within the room the template's own command line has
(reserved by a spawned template; the orchestrator's command line for a forked one), so ``ps`` and
``/proc/PID/cmdline`` name the server it runs.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import runpy
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

ARG_START_FIELD = 48
"""``arg_start`` in ``/proc/self/stat`` (proc(5)); ``arg_end`` follows it."""
FIRST_FIELD_AFTER_NAME = 3


def become(request: dict[str, Any], fds: list[int], closing: list[int]) -> NoReturn:
    code = 1
    try:
        _detach(fds, closing)
        _settle(request)
        code = run(str(request["module"]), [str(a) for a in request["args"]])
    except BaseException:  # noqa: BLE001 -- reported exactly as the interpreter would, then exit 1
        sys.excepthook(*sys.exc_info())
    finally:
        os._exit(code)


def _detach(fds: list[int], closing: list[int]) -> None:
    os.setsid()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in {*fds, *closing} - {0, 1, 2}:
        os.close(fd)


def _settle(request: dict[str, Any]) -> None:
    cwd = str(request["cwd"])
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in dict(request["env"]).items()})
    sys.path[0] = cwd
    set_title([str(part) for part in request["title"]])


def run(module: str, args: list[str]) -> int:
    """``python -m MODULE ARGS...`` in this process; the exit code the interpreter would use."""
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exit_code(exc.code)
    except KeyboardInterrupt:
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    atexit._run_exitfuncs()
    _flush()
    return code


def exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            continue


def set_title(argv: list[str]) -> None:
    """Rewrite this process's command line within the room its argv already has."""
    try:
        stat = Path("/proc/self/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        index = ARG_START_FIELD - FIRST_FIELD_AFTER_NAME
        start, end = int(fields[index]), int(fields[index + 1])
    except (OSError, ValueError, IndexError):
        return
    room = end - start
    if room <= 1:
        return
    text = fitted(argv, room - 1)
    ctypes.memmove(start, text.ljust(room, b"\0"), room)


def fitted(argv: list[str], room: int) -> bytes:
    """``argv`` as a command line of at most ``room`` bytes: when the whole does not fit, the
    program is named without its directory first, so ``-m MODULE`` stays readable."""
    text = "\0".join(argv).encode()
    if len(text) > room and argv:
        text = "\0".join([Path(argv[0]).name, *argv[1:]]).encode()
    return text[:room]
