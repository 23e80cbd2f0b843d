"""A real filesystem that runs out of space: a small tmpfs mounted for one test, filled on demand.

Mounting needs root (CI runs as root); elsewhere the tests using it are skipped with the reason.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from mcp import Client

from shared.protocol.storage import StorageStatusParams, StorageStatusRequest, StorageStatusResult

SIZE = "4m"
T = TypeVar("T")


class FullDisk:
    """The mounted directory `root`; `fill()` takes every free byte, `free()` gives them back."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._filler = root / "filler"

    def fill(self) -> None:
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for size in (65536, 4096, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
        finally:
            os.close(fd)
        assert shutil.disk_usage(self.root).free == 0

    def free(self) -> None:
        self._filler.unlink()


def _mount(root: Path) -> str | None:
    """None when mounted, else why it could not be."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root (CI runs the suite as root)"
    mount = shutil.which("mount")
    if mount is None:
        return "no `mount` command on this machine"
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={SIZE},mode=0700", "tmpfs", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}"
    return None


@pytest.fixture
def full_disk() -> Iterator[FullDisk]:
    # A short path of its own: a console socket under it must fit AF_UNIX's 108 bytes, which a deep
    # pytest temporary directory does not always leave room for.
    base = Path(tempfile.mkdtemp(prefix="nexo-full-"))
    root = base / "small"
    root.mkdir()
    why = _mount(root)
    if why is not None:
        shutil.rmtree(base)
        pytest.skip(why)
    try:
        yield FullDisk(root)
    finally:
        subprocess.run(["umount", "--lazy", str(root)], check=True)
        shutil.rmtree(base, ignore_errors=True)


ATTEMPTS = 200


def refusal(path: Path) -> str:
    """The sentence a write refused on a full disk carries."""
    return (
        f"not stored: the disk holding {path} is full. Fix: free space on that filesystem (`df -h` shows "
        "it); nothing stored before was lost, and writes resume by themselves"
    )


async def until_refused(write: Callable[[int], Awaitable[T]], *, refused: Callable[[T], bool]) -> list[T]:
    """Call `write(n)` for n = 0, 1, ... until an answer is a refusal; every answer, refusal last.

    A tmpfs filled to the last byte still takes writes that fit in pages SQLite already holds, so the
    refusal comes within a few writes rather than at the first.
    """
    answers: list[T] = []
    for attempt in range(ATTEMPTS):
        answers.append(await write(attempt))
        if refused(answers[-1]):
            return answers
    raise AssertionError(f"{ATTEMPTS} writes on a full disk were all accepted")


async def storage_status(client: Client) -> StorageStatusResult:
    request = StorageStatusRequest(params=StorageStatusParams())
    return await client.session.send_request(request, StorageStatusResult)
