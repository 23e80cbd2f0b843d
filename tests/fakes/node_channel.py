"""The TypeScript Claude Code channel of ``tests/fakes/claude_channel_ts``, installed for the tests.

Its one dependency, the official ``@modelcontextprotocol/sdk``, comes from the npm registry with the
machine's ``npm`` into a cache directory keyed by the fixture's own files, so it is installed once
per change of the fixture and then reused. Node and npm come from the system (``.ci/run`` installs
them when they are missing).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "claude_channel_ts"
FILES = ("package.json", "server.mjs")
INSTALL_TIMEOUT_S = 300


class NodeMissing(RuntimeError):
    """Node or npm is not installed."""


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "nexo-tests"


def node() -> str:
    found = shutil.which("node")
    if found is None:
        raise NodeMissing("node is not installed; install Debian's nodejs and npm (.ci/run does)")
    return found


def installed_server() -> Path:
    """``server.mjs`` in a directory whose ``node_modules`` holds the SDK, installing it if needed."""
    digest = hashlib.sha256(b"".join((SOURCE / name).read_bytes() for name in FILES)).hexdigest()[:16]
    target = _cache_root() / f"claude-channel-ts-{digest}"
    if (target / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").is_file():
        return target / "server.mjs"
    npm = shutil.which("npm")
    if npm is None:
        raise NodeMissing("npm is not installed; install Debian's nodejs and npm (.ci/run does)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="claude-channel-ts-", dir=target.parent))
    for name in FILES:
        shutil.copy2(SOURCE / name, staging / name)
    result = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--omit=dev", "--loglevel=error"],
        cwd=staging,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"npm install of the TypeScript channel fixture failed:\n{result.stderr[-2000:]}")
    try:
        staging.rename(target)
    except OSError:  # another run installed it first
        shutil.rmtree(staging, ignore_errors=True)
    return target / "server.mjs"
