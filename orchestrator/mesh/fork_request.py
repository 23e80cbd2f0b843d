"""What the fork server is asked for: which servers it forks, and the request that starts one.

A server is forked only when it is a built-in module (``python -m servers.X`` or
``python -m channel_servers.X``) run by this very interpreter, and only by a template whose
interpreter runs with the ``PYTHON*`` variables the server asks for: they act when an interpreter
starts, which a forked child does not.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.mesh.config import StdioServerConfig

BUILT_IN_PACKAGES = ("servers", "channel_servers")


def built_in_module(config: StdioServerConfig) -> str | None:
    """The module of ``python -m servers.X`` run by this interpreter; None for any other command."""
    # absolute(), not resolve(): a virtualenv's python is a symlink to an interpreter without its packages.
    if Path(config.command).absolute() != Path(sys.executable).absolute():
        return None
    if len(config.args) < 2 or config.args[0] != "-m":
        return None
    module = config.args[1]
    return module if module.partition(".")[0] in BUILT_IN_PACKAGES else None


@dataclass(frozen=True, slots=True)
class ForkRequest:
    module: str
    args: list[str]
    env: dict[str, str]
    cwd: str

    def message(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "args": self.args,
            "env": self.env,
            "cwd": self.cwd,
            "title": [sys.executable, "-m", self.module, *self.args],
        }


def interpreter_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The ``PYTHON*`` variables of ``env``: what an interpreter started with it runs with."""
    return {key: value for key, value in env.items() if key.startswith("PYTHON")}
