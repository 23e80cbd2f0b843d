"""The suite's temporary directories in memory, on the machine's tmpfs when it has a roomy one.

Every store commits with ``synchronous=FULL``, so each commit waits for an fsync: 4-5 ms on the CI
machine's disk, and a message through the mesh makes several (the channel's event log, its
acknowledgement, the pairing, audit and memory stores). On a tmpfs an fsync returns at once. The files
stay real SQLite files on a real filesystem; only their survival of a power cut is lost, which no
test can observe (a SIGKILL leaves written pages in the page cache on either).

``pytest_configure`` points pytest's temporary root (the documented ``PYTEST_DEBUG_TEMPROOT``) at
``/dev/shm`` when /proc/self/mounts lists it as a tmpfs with at least ``MIN_FREE_BYTES`` free, unless
``--basetemp`` or ``PYTEST_DEBUG_TEMPROOT`` already says where. Elsewhere (a container's 64 MB
/dev/shm, macOS) the tests keep the system's temporary directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

TMPFS = Path("/dev/shm")
MIN_FREE_BYTES = 1 << 30
TEMPROOT_VARIABLE = "PYTEST_DEBUG_TEMPROOT"


def is_tmpfs(mount_point: Path, mounts: str) -> bool:
    """Whether ``mounts`` (the text of /proc/self/mounts) lists ``mount_point`` as a tmpfs."""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1] == str(mount_point) and fields[2] == "tmpfs":
            return True
    return False


def free_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def memory_temp_root(mounts: str, free: Callable[[Path], int] = free_bytes) -> Path | None:
    """``TMPFS`` when it is a tmpfs with room for the suite's files, else None."""
    if not is_tmpfs(TMPFS, mounts) or free(TMPFS) < MIN_FREE_BYTES:
        return None
    return TMPFS


def _mounts() -> str:
    try:
        return Path("/proc/self/mounts").read_text()
    except OSError:  # not Linux
        return ""


def pytest_configure(config: pytest.Config) -> None:
    if config.option.basetemp is not None or TEMPROOT_VARIABLE in os.environ:
        return
    root = memory_temp_root(_mounts())
    if root is not None:
        os.environ[TEMPROOT_VARIABLE] = str(root)
