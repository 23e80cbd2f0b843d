"""Reading the orchestrator's config imports its settings models and nothing of the machinery.

A fresh interpreter loads the built-in config (every server, channel, permission and autonomy
setting is validated) and lists what it imported. The MCP SDK, the HTTP stacks, the mesh's
clients, the approval relay, the dashboard's app and the loop stay out: a command that only reads
the config (``nexo check``, ``nexo setup doctor``) does not pay for them, and ``nexo run`` imports
them when it starts the mesh. The daemon itself relays approvals without the channel kit, which
only channel servers import.
"""

from __future__ import annotations

import json
import subprocess
import sys

LOAD_BUILT_IN = """
import json, sys
from orchestrator.config.loading import load
config = load(None)
print(json.dumps({
    "agents": [agent.id for agent in config.agents],
    "servers": sorted(config.servers),
    "modules": sorted(sys.modules),
}))
"""

NOT_FOR_READING_A_CONFIG = (
    "mcp",
    "mcp_types",
    "httpx2",
    "uvicorn",
    "starlette",
    "sse_starlette",
    "jsonschema",
    "orchestrator.mesh.connection",
    "orchestrator.mesh.catalog",
    "orchestrator.mesh.mesh",
    "orchestrator.permissions.approvals",
    "orchestrator.permissions.gate",
    "orchestrator.dashboard.app",
    "orchestrator.loop",
    "orchestrator.goals",
    "orchestrator.intake",
    "orchestrator.client_actions",
    "orchestrator.daemon",
    "orchestrator.llm.anthropic",
    "orchestrator.llm.openai_compat",
    "shared.protocol.audit",
    "shared.channelkit",
)


def _under(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == name or m.startswith(f"{name}.") for name in names))


def test_loading_the_built_in_config_imports_none_of_the_machinery() -> None:
    result = subprocess.run(
        [sys.executable, "-c", LOAD_BUILT_IN], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = json.loads(result.stdout)
    assert loaded["agents"] == ["nexo"]
    assert {"memory", "audit", "console"} <= set(loaded["servers"])  # the whole default mesh was read
    assert "orchestrator.dashboard.options" in loaded["modules"]  # its settings are part of the config
    assert _under(loaded["modules"], NOT_FOR_READING_A_CONFIG) == []


IMPORT_THE_DAEMON = """
import json, sys
import orchestrator.daemon.orchestrator
print(json.dumps(sorted(sys.modules)))
"""

NOT_BEFORE_THE_FIRST_TOOL_CALL = (
    "jsonschema",
    "orchestrator.llm.anthropic",
    "orchestrator.llm.openai_compat",
    "orchestrator.dashboard.app",
    "orchestrator.dashboard.serve",
)
"""Argument checking comes with the first tool call, a provider's client when that provider is
built (only the configured ones are), the dashboard's app when ``dashboard.port`` is set."""


def test_the_daemon_module_imports_no_schema_checker_provider_client_or_dashboard_app() -> None:
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_THE_DAEMON], capture_output=True, text=True, timeout=60, check=True
    )
    modules = json.loads(result.stdout)
    assert "mcp" in modules  # the daemon itself was imported, with the SDK it runs on
    assert _under(modules, NOT_BEFORE_THE_FIRST_TOOL_CALL) == []


DAEMON = """
import json, sys
import orchestrator.daemon.orchestrator
print(json.dumps(sorted(sys.modules)))
"""


def test_the_daemon_relays_approvals_without_importing_the_channel_kit() -> None:
    # The permission prompt's wire models live in shared.protocol.permission_prompts: the kit (its
    # outbox, files and media code) is what a channel server imports, never the orchestrator.
    result = subprocess.run(
        [sys.executable, "-c", DAEMON], capture_output=True, text=True, timeout=60, check=True
    )
    modules = json.loads(result.stdout)
    assert "orchestrator.permissions.approvals" in modules
    assert [m for m in modules if m == "shared.channelkit" or m.startswith("shared.channelkit.")] == []
