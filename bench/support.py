"""What several measurements share: progress output, bounded waits, processes and their memory."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import anyio

from orchestrator.mesh import Mesh, SupervisionConfig
from orchestrator.mesh.errors import describe_error
from tests.mesh.harness import child_pids, stop

CONNECT_TIMEOUT_S = 20.0
"""How long a benchmark waits for a server before it reports the server as unavailable."""
GIVE_UP_AFTER_FAILURES = 3
"""Consecutive failed connects after which waiting longer would only hide a broken server."""
FAST_SUPERVISION = SupervisionConfig(initial_backoff_s=0.05, max_backoff_s=0.5)
CHILD_ENV = {"NEXO_LOG_LEVEL": "WARNING"}


def progress(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


@contextmanager
def collector_frozen() -> Iterator[None]:
    """What this process made so far out of the collector's reach while a timed loop runs, as a
    server's start (``shared.hosting.serve.run``) and the daemon's (``orchestrator.gc_pause``) are:
    the benchmark's process holds its corpus, meshes and imports, and a full collection walking
    them (50 to 260 ms here) landed in whichever timed call ran, a pause of the measuring process,
    not of nexo. Given back to the collector afterwards."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def describe(exc: BaseException) -> str:
    """One line for an exception, exception groups unwrapped."""
    return describe_error(exc)


async def connect(mesh: Mesh, name: str, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """Wait until ``name`` is connected: None when it is, else why it is not."""
    connection = mesh[name]
    with anyio.move_on_after(timeout):
        while connection.client is None:
            if connection.breaker.failures >= GIVE_UP_AFTER_FAILURES:
                return (
                    f"server {name!r} failed {connection.breaker.failures} connects in a row; "
                    f"last error: {connection.last_error}"
                )
            await anyio.sleep(0.02)
    if connection.client is None:
        return f"server {name!r} not connected within {timeout:g}s ({connection.last_error or 'no error'})"
    return None


def wait_for_port(process: subprocess.Popen[bytes], port: int, timeout: float) -> str | None:
    """Wait until something listens on 127.0.0.1:``port``: None when it does, else why not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"exited with status {process.returncode} before listening on port {port}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return None
        except OSError:
            time.sleep(0.02)
    return f"not listening on port {port} after {timeout:g}s"


@contextmanager
def spawned(argv: list[str], env: Mapping[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], IO[bytes]]]:
    """A child process whose stderr goes to a temporary file (for error reports); stopped on exit."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=dict(env)
        )
        try:
            yield process, log
        finally:
            stop(process)


def tail(log: IO[bytes], lines: int = 5) -> str:
    log.seek(0)
    text = log.read().decode(errors="replace").strip().splitlines()
    return " / ".join(text[-lines:]) or "(no output)"


# -- processes and memory (Linux /proc) ------------------------------------------------------


def process_tree(root: int) -> list[int]:
    """``root`` and every process descended from it."""
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:  # a fork server's children are listed under the orchestrator too
            tree.append(pid)
            todo.extend(child_pids(pid, ""))
    return tree


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of process ``pid`` so far (``/proc/<pid>/stat``); None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int | None:
    """Resident set size from ``/proc/<pid>/status``; None when the process is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


def total_rss_mb(pids: list[int]) -> float:
    return sum(rss_bytes(pid) or 0 for pid in pids) / 1e6
