"""Run a check as another user (``nobody``) in a forked child, for permission errors root never sees."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

NOBODY = 65534


@contextmanager
def reachable_tmp() -> Iterator[Path]:
    """A temporary directory another user can reach (pytest's own is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="nexo-as-nobody-"))
    try:
        path.chmod(0o755)
        yield path
    finally:
        shutil.rmtree(path)


def answer_as_nobody(check: Callable[[], str]) -> str:
    """What ``check`` returns when run as uid/gid 65534, or the repr of what it raised."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover -- the child reports through the pipe
        os.close(read)
        try:
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            answer = check()
        except BaseException as exc:  # noqa: BLE001 -- whatever it is, the parent's assert shows it
            answer = repr(exc)
        os.write(write, answer.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read().decode()
    os.waitpid(child, 0)
    return answer
