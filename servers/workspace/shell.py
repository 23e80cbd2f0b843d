"""Running one shell command with a minimal environment, a timeout and capped output."""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio
import anyio.to_thread
from anyio.abc import ByteReceiveStream
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

MAX_COMMAND_BYTES = 16 * 1024
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
PIPE_GRACE_S = 2.0
"""After the command ends, how long to wait for output still buffered in its pipes."""
PR_SET_CHILD_SUBREAPER = 36
MAX_REAP_ROUNDS = 64
"""Killing a stray re-parents its own children here; each round takes one generation."""

# A word ending in sed (sed, gsed, /usr/bin/sed), then any option of the same command that is
# -i (also inside a cluster such as -Ei, or -i.bak) or a long option starting --i (GNU sed has
# only --in-place, and accepts its abbreviations).
_SED_IN_PLACE = re.compile(
    r"""(?:^|[\s;&|(`'"])(?:[^\s;&|]*/)?g?sed\s[^;&|\n]*?(?<=\s)(?:-[A-Za-z]*i|--i[\w-]*)""",
)


class ShellResult(BaseModel):
    exit_code: int | None
    """The command's exit status; negative is the signal that ended it; None when it timed out."""
    stdout: str
    stderr: str
    stdout_bytes: int
    """Bytes the command wrote to stdout (the text keeps the head, at most ``max_output_bytes``)."""
    stderr_bytes: int
    timed_out: bool
    truncated: bool
    """True when stdout or stderr was cut; the text then ends with how many bytes were cut."""
    sandbox: Literal["bwrap", "none"]
    duration_ms: int
    warning: str | None = None


@dataclass(frozen=True, slots=True)
class Completed:
    exit_code: int | None
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    timed_out: bool
    truncated: bool
    duration_ms: int


def check_command(command: str) -> None:
    """Refuse a command line before anything runs."""
    if not command.strip():
        raise ToolError("command is empty; give a shell command line such as 'ls -la'")
    if "\x00" in command:
        raise ToolError("command contains a NUL byte, which no shell command line can carry; remove it")
    size = len(command.encode())
    if size > MAX_COMMAND_BYTES:
        raise ToolError(
            f"command is {size} bytes; the limit is {MAX_COMMAND_BYTES}. Write a long script to a file "
            "with write_file and run that file instead"
        )
    if _SED_IN_PLACE.search(command):
        raise ToolError(
            "`sed -i` (in-place editing) is refused: change files with edit_file (an exact "
            "replacement) or write_file, which stay inside the workspace and write atomically"
        )


def minimal_env(root: Path) -> dict[str, str]:
    """The whole environment of a command: nothing of the server's own environment is passed on."""
    return {"PATH": SAFE_PATH, "HOME": str(root), "LANG": "C.UTF-8"}


@dataclass(slots=True)
class _Head:
    """Keeps the first ``limit`` bytes of a stream and counts the rest."""

    limit: int
    head: bytearray = field(default_factory=bytearray)
    total: int = 0
    done: anyio.Event = field(default_factory=anyio.Event)

    async def drain(self, stream: ByteReceiveStream) -> None:
        try:
            async for chunk in stream:
                self.total += len(chunk)
                room = self.limit - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
        finally:
            self.done.set()

    @property
    def cut(self) -> int:
        return self.total - len(self.head)

    def text(self) -> str:
        cut = self.cut
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # Not final when cut: a character split by the cap is dropped rather than mangled.
        body = decoder.decode(bytes(self.head), final=cut == 0)
        cut += len(decoder.getstate()[0])
        return body if cut == 0 else f"{body}\n[... {cut} more bytes cut]"


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@dataclass(slots=True)
class _Adoption:
    """Whether this process adopts the orphans of the commands it runs, and which commands run now."""

    enabled: bool = False
    running: set[int] = field(default_factory=set)


_adoption = _Adoption()


def adopt_orphans() -> bool:
    """Make this process the subreaper of every command it starts (Linux ``PR_SET_CHILD_SUBREAPER``).

    A command's detached descendants (``setsid -f``, double forks, daemons) are then re-parented here
    instead of to init, so they are found and killed when the call ends: no command outlives its
    call, even unconfined. Called once by the server's ``main()``, never in a process that runs other
    work (a test runner would collect every orphan of its own). False where the kernel refuses.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _adoption.enabled = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _adoption.enabled = False
    return _adoption.enabled


def _children_of(parent: int) -> list[int]:
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == parent:
            found.append(int(entry.name))
    return found


def kill_strays(keep: set[int]) -> int:
    """SIGKILL and reap every child of this process not in ``keep`` (adopted orphans), generation by
    generation; returns how many were ended."""
    me, ended = os.getpid(), 0
    for _ in range(MAX_REAP_ROUNDS):
        strays = [pid for pid in _children_of(me) if pid not in keep]
        if not strays:
            break
        for pid in strays:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in strays:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        ended += len(strays)
    return ended


async def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    max_output_bytes: int,
) -> Completed:
    """Run ``argv`` in its own process group with stdin from /dev/null.

    On timeout the whole group gets SIGKILL. When the command ends, whatever it left running in
    its group is killed too, and, where this process adopts orphans (:func:`adopt_orphans`),
    whatever left the group (``setsid``) as well: a command never outlives its call.
    """
    started = anyio.current_time()
    try:
        process = await anyio.open_process(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"could not start {argv[0]!r}: {exc.strerror or exc}") from exc
    assert process.stdout is not None
    assert process.stderr is not None
    out, err = _Head(max_output_bytes), _Head(max_output_bytes)
    _adoption.running.add(process.pid)
    try:
        async with anyio.create_task_group() as readers:
            readers.start_soon(out.drain, process.stdout)
            readers.start_soon(err.drain, process.stderr)
            with anyio.move_on_after(timeout_s) as deadline:
                await process.wait()
            timed_out = deadline.cancelled_caught
            _kill_group(process.pid)
            with anyio.move_on_after(PIPE_GRACE_S):
                await process.wait()
                await out.done.wait()
                await err.done.wait()
            readers.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                _kill_group(process.pid)
            await process.aclose()
            _adoption.running.discard(process.pid)
            if _adoption.enabled:
                await anyio.to_thread.run_sync(kill_strays, set(_adoption.running))
    return Completed(
        exit_code=None if timed_out else process.returncode,
        stdout=out.text(),
        stderr=err.text(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        timed_out=timed_out,
        truncated=out.cut > 0 or err.cut > 0,
        duration_ms=round((anyio.current_time() - started) * 1000),
    )
