"""A person at a terminal: ``nexo run --chat`` under a pseudo-terminal, typed at and read back.

Keys are written to the terminal (Ctrl-C is ``\\x03``), so the terminal's own line discipline turns
them into signals and end-of-input as it does for a person; every wait is bounded.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.mesh.harness import REPO

CTRL_C = b"\x03"
CTRL_D = b"\x04"
POLL_S = 0.005


@dataclass
class Terminal:
    pid: int
    fd: int
    screen: bytearray = field(default_factory=bytearray)
    status: int | None = None

    @property
    def text(self) -> str:
        return self.screen.decode(errors="replace").replace("\r\n", "\n")

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def _read(self, deadline: float) -> bool:
        """Read what is there within the deadline; False once the program has closed the terminal."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: every process holding the terminal has exited
            return False
        self.screen += chunk
        return bool(chunk)

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.text:
            if time.monotonic() >= deadline or not self._read(deadline):
                raise AssertionError(f"{text!r} never appeared on the terminal; it shows:\n{self.text}")

    def wait_until(self, done: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
        """Keep reading the terminal until ``done()`` holds, checked at least every 5 ms."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() >= deadline:
                raise AssertionError(f"{what} never happened; the terminal shows:\n{self.text}")
            if not self._read(min(deadline, time.monotonic() + POLL_S)):
                raise AssertionError(f"nexo exited before {what}; the terminal shows:\n{self.text}")

    def wait_exit(self, timeout: float) -> int:
        """The exit status, once the program has exited within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self._read(deadline):
            if time.monotonic() >= deadline:
                raise AssertionError(f"still running after {timeout:g} s; the terminal shows:\n{self.text}")
        _, status = os.waitpid(self.pid, 0)
        self.status = os.waitstatus_to_exitcode(status)
        return self.status


def processes_of(state_dir: Path) -> list[str]:
    """Command lines of the live processes started for ``state_dir`` (their environment names it)."""
    needle = f"NEXO_STATE_DIR={state_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in environ and cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


@contextmanager
def on_a_terminal(argv: list[str], env: Mapping[str, str]) -> Iterator[Terminal]:
    """``argv`` (this interpreter's) started on a new pseudo-terminal as a shell starts a command:
    from the project's root, with the default signal dispositions and no signal blocked (an ignored
    SIGINT of the test process would survive exec, and Python then leaves Ctrl-C ignored). Killed
    if still running at the end of the block."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover -- the child becomes the command at once
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        for signum in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGTSTP):
            signal.signal(signum, signal.SIG_DFL)
        os.chdir(REPO)
        os.execve(sys.executable, argv, dict(env))  # noqa: S606 -- our own interpreter, explicit argv
    terminal = Terminal(pid, fd)
    try:
        yield terminal
    finally:
        if terminal.status is None:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)


def nexo_run_chat(env: Mapping[str, str]) -> AbstractContextManager[Terminal]:
    """``nexo run --chat`` with the built-in defaults on a new pseudo-terminal (``on_a_terminal``)."""
    return on_a_terminal([sys.executable, "-m", "orchestrator.cli.main", "run", "--chat"], env)
