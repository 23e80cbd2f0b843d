"""One orchestrator per state directory: a second ``nexo run`` refuses and names the first."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from types import TracebackType
from typing import IO

from shared.private import make_private_dirs


class AlreadyRunning(Exception):
    pass


class InstanceLock:
    def __init__(self, state_dir: Path, *, config: str) -> None:
        self.path = state_dir / "orchestrator.lock"
        self._config = config
        self._file: IO[str] | None = None

    def __enter__(self) -> InstanceLock:
        make_private_dirs(self.path.parent)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            try:
                info = json.loads(holder)
                who = f"pid {info['pid']}, started {info['started']}, config {info['config']}"
            except (ValueError, KeyError):
                who = "another process"
            raise AlreadyRunning(
                f"nexo is already running on state directory {self.path.parent} ({who}); "
                "stop it first (`kill <pid>`), or give this one another state_dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        handle.write(json.dumps({"pid": os.getpid(), "started": started, "config": self._config}))
        handle.flush()
        self._file = handle
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._file is not None:
            self._file.truncate(0)
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None
