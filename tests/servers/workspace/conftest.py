"""Shared pieces of the workspace server tests: settings in tmp_path, an in-memory client, helpers."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Client

from servers.workspace.server import build_server
from servers.workspace.settings import WorkspaceSettings


def _bwrap_unusable() -> str | None:
    """Why bubblewrap cannot sandbox here (not installed, or no namespaces allowed), or None."""
    program = shutil.which("bwrap")
    if program is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    probe = subprocess.run(
        [program, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot create namespaces on this machine: {probe.stderr.strip()[:200]}"
    return None


_UNUSABLE = _bwrap_unusable()
needs_bwrap = pytest.mark.skipif(_UNUSABLE is not None, reason=_UNUSABLE or "")


@pytest.fixture
def settings(tmp_path: Path) -> WorkspaceSettings:
    """Unconfined shell: the sandbox has tests of its own (test_sandbox.py)."""
    return WorkspaceSettings(state_dir=tmp_path / "state", sandbox="none")


@pytest.fixture
def root(settings: WorkspaceSettings) -> Path:
    """The workspace root, created as the server creates it, so tests can lay out files first."""
    path = settings.workspace
    path.mkdir(mode=0o700, parents=True)
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace holding a file no tool may reach."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("outside secret\n")
    return path


@asynccontextmanager
async def connected(settings: WorkspaceSettings) -> AsyncIterator[Client]:
    async with Client(build_server(settings)) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """The structured result of a call that must succeed."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error is False, result.content
    structured: dict[str, Any] | None = result.structured_content
    assert structured is not None
    return structured


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    """The message of a call that must fail, without the SDK's prefix."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error is True, result.structured_content
    [content] = result.content
    assert isinstance(content, types.TextContent)
    prefix = f"Error executing tool {tool}: "
    assert content.text.startswith(prefix)
    return content.text.removeprefix(prefix)


def names(directory: Path) -> list[str]:
    """The sorted entry names of a host directory."""
    return sorted(entry.name for entry in directory.iterdir())


def exists(path: Path) -> bool:
    return path.exists()


async def wait_gone(pid: int, timeout_s: float = 5.0) -> None:
    """Wait until a process has exited (a zombie counts as exited); fail after ``timeout_s``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with anyio.fail_after(timeout_s):
            await anyio.wait_readable(fd)
    finally:
        os.close(fd)


def sleepers(marker: str) -> list[int]:
    """Host pids of live ``sleep <marker>`` processes (zombies are gone already)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmdline == f"sleep\0{marker}\0".encode() and state != "Z":
            found.append(int(entry.name))
    return found


@contextmanager
def killed_afterwards(marker: str) -> Iterator[None]:
    """Whatever the test's outcome, no ``sleep <marker>`` it started is left running."""
    try:
        yield
    finally:
        for pid in sleepers(marker):
            os.kill(pid, signal.SIGKILL)


async def survivors(marker: str) -> list[int]:
    """The ``sleep <marker>`` processes still alive after each had a bounded wait to end."""
    for pid in sleepers(marker):
        with contextlib.suppress(TimeoutError):
            await wait_gone(pid)
    return sleepers(marker)
