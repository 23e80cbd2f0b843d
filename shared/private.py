"""Files and directories only this user may read: state directories, databases, keys and tokens."""

from __future__ import annotations

import os
import secrets
from contextlib import suppress
from pathlib import Path


def make_private_dirs(directory: Path) -> None:
    """Create ``directory`` and every missing parent with mode 0700 (``mkdir(parents=True)`` would
    give the parents the umask's mode). The mode is set after ``mkdir`` because ``mkdir`` itself
    applies the umask, and a strict one (0177) would leave a directory nobody can enter."""
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        path.chmod(0o700)


def create_private_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (mode 0600) unless it exists. Written whole to a private temporary
    file, then linked into place: another process starting at the same moment sees either no file or
    the complete one, and the first link wins."""
    make_private_dirs(path.parent)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        with suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
