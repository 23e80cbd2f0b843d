"""Importing the built-in servers builds none of the wire contracts' models; starting one builds at
most a few of its own.

A server's tool schemas come from its tool functions; a contract's request and result models are
built by the first request that uses them. A fresh interpreter imports five servers, reports which
``shared.protocol`` models are built by then, starts each in memory and lists its tools, and reports
what each start built. (The audit server may build its chain head while it starts: a background
task, so whether it has run by the time the tools are listed varies; it is its own contract.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

START_EACH = """
import importlib, json, pkgutil, sys

import anyio
import pydantic
from mcp import Client

import shared.protocol as package

SERVERS = {
    "servers.pairing": "PairingSettings",
    "servers.audit": "AuditSettings",
    "servers.cron": "CronSettings",
    "servers.memory": "MemorySettings",
    "channel_servers.console": "ConsoleSettings",
}
servers = {name: importlib.import_module(f"{name}.server") for name in SERVERS}
settings = {name: getattr(importlib.import_module(f"{name}.settings"), cls) for name, cls in SERVERS.items()}


def built():
    # Walked, not listed: a contract may be a package of modules (shared.protocol.audit).
    modules = [sys.modules[m.name] for m in pkgutil.walk_packages(package.__path__, "shared.protocol.")
               if m.name in sys.modules]
    return {
        f"{value.__module__}.{value.__qualname__}"
        for module in modules
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, pydantic.BaseModel)
        and value.__module__ == module.__name__
        and value.__pydantic_complete__
        and not value.__pydantic_generic_metadata__["parameters"]
    }


tools = {}


async def start(name):
    async with Client(servers[name].build_server(settings[name]())) as client:  # NEXO_STATE_DIR
        tools[name] = len((await client.list_tools()).tools)


at_import = built()
by_start = {}
for name in SERVERS:
    before = built()
    anyio.run(start, name)
    by_start[name] = sorted(built() - before)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("orchestrator", "numpy", "onnxruntime"))
print(json.dumps({"tools": tools, "at_import": sorted(at_import), "by_start": by_start, "heavy": heavy}))
"""

OWN_CONTRACT = {
    "servers.pairing": "shared.protocol.pairing.",
    "servers.audit": "shared.protocol.audit.",
    "servers.cron": "shared.protocol.cron.",
    "servers.memory": "shared.protocol.memory.",
    "channel_servers.console": "shared.protocol.channel.",
}


def test_importing_the_built_in_servers_builds_no_contract_model_and_a_start_only_its_own(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", START_EACH],
        capture_output=True,
        text=True,
        env={**os.environ, "NEXO_STATE_DIR": str(tmp_path)},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    started = json.loads(result.stdout)
    tools = started["tools"]
    assert sorted(tools) == sorted(OWN_CONTRACT)
    assert tools["servers.pairing"] == 0  # it serves control-plane requests only
    assert all(count > 0 for name, count in tools.items() if name != "servers.pairing")
    assert started["at_import"] == []
    foreign = {
        name: [model for model in models if not model.startswith(OWN_CONTRACT[name])]
        for name, models in started["by_start"].items()
    }
    assert foreign == {name: [] for name in OWN_CONTRACT}
    assert started["heavy"] == []
