"""The official MCP Inspector's CLI (``@modelcontextprotocol/inspector --cli``) against nexo's servers.

The Inspector needs Node 22.19 or newer; both come from the npm registry into a cache directory
(``NEXO_INSPECTOR_CACHE``, default ``~/.cache/nexo/inspector``), as the conformance suite does, so the
machine's own Node only has to provide ``npm``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.interop import npm

INSPECTOR_PACKAGE = "@modelcontextprotocol/inspector"
INSPECTOR_VERSION = "2.12.0"
INSTALL_TIMEOUT_S = 900
CALL_TIMEOUT_S = 120


class InspectorFailed(Exception):
    """The Inspector ran and exited non-zero; the message holds its stderr."""


@dataclass(frozen=True, slots=True)
class Inspector:
    node: Path
    entry: Path
    home: Path
    """HOME for the Inspector, which keeps a catalog file there."""

    def version(self) -> str:
        return self._run(["--version"], {}).strip()

    def _run(self, args: Sequence[str], env: Mapping[str, str]) -> str:
        self.home.mkdir(parents=True, exist_ok=True)
        environ = {"PATH": os.environ.get("PATH", ""), "HOME": str(self.home), **env}
        done = subprocess.run(
            [str(self.node), str(self.entry), "--cli", *args],
            capture_output=True,
            text=True,
            env=environ,
            timeout=CALL_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise InspectorFailed(
                f"inspector --cli {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
            )
        return done.stdout

    def call(
        self, target: Sequence[str], method: str, *extra: str, env: Mapping[str, str] | None = None
    ) -> Any:
        """One ``--method`` against ``target`` (a command line, or ``URL --transport http --header ...``):
        the JSON the Inspector prints."""
        return json.loads(self._run([*target, "--method", method, *extra], env or {}))


def cache_dir() -> Path:
    return npm.cache_dir("NEXO_INSPECTOR_CACHE", "inspector")


def install(cache: Path) -> Inspector:
    """Node 22 and the pinned Inspector in ``cache`` (installed once, reused after)."""
    package = cache / "node_modules" / INSPECTOR_PACKAGE
    inspector = Inspector(
        node=npm.node_in(cache),
        entry=package / "clients" / "launcher" / "build" / "index.js",
        home=cache / "home",
    )
    npm.npm_install(cache, INSPECTOR_PACKAGE, INSPECTOR_VERSION, inspector.entry, timeout_s=INSTALL_TIMEOUT_S)
    return inspector
