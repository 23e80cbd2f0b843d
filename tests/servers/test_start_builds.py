"""Starting a built-in server and listing its tools builds none of the wire contracts' models.

A server's tool schemas come from its tool functions; the contracts' request and result models
are built by the first control-plane request that uses them. A fresh interpreter starts each server
in memory, lists its tools and reports which ``shared.protocol`` models are built by then, and
whether anything of the orchestrator or of another server's heavy dependencies came along.
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
tools = {}


async def start(name, settings_class):
    server = importlib.import_module(f"{name}.server")
    settings = getattr(importlib.import_module(f"{name}.settings"), settings_class)()  # NEXO_STATE_DIR
    async with Client(server.build_server(settings)) as client:
        tools[name] = len((await client.list_tools()).tools)


for name, settings_class in SERVERS.items():
    anyio.run(start, name, settings_class)
modules = [sys.modules[f"shared.protocol.{m.name}"] for m in pkgutil.iter_modules(package.__path__)
           if f"shared.protocol.{m.name}" in sys.modules]
built = sorted(
    f"{value.__module__}.{value.__qualname__}"
    for module in modules
    for value in vars(module).values()
    if isinstance(value, type)
    and issubclass(value, pydantic.BaseModel)
    and value.__module__ == module.__name__
    and value.__pydantic_complete__
    and not value.__pydantic_generic_metadata__["parameters"]
)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("orchestrator", "numpy", "onnxruntime"))
print(json.dumps({"tools": tools, "contracts": len(modules), "built": built, "heavy": heavy}))
"""


def test_starting_the_built_in_servers_builds_no_contract_model(tmp_path: Path) -> None:
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
    assert sorted(tools) == [
        "channel_servers.console",
        "servers.audit",
        "servers.cron",
        "servers.memory",
        "servers.pairing",
    ]
    assert tools["servers.pairing"] == 0  # it serves control-plane requests only
    assert all(count > 0 for name, count in tools.items() if name != "servers.pairing")
    assert started["contracts"] >= 8  # the servers imported their contracts: there was something to build
    assert started["built"] == []
    assert started["heavy"] == []
