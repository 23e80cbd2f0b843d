"""The official MCP Inspector CLI lists tools and calls a harmless one on ``nexo mcp-server`` and on
built-in servers, over stdio and over HTTP with a bearer token (results in docs/interop.md)."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

import pytest

from tests.http_server import http_server
from tests.interop.inspector import INSPECTOR_VERSION, Inspector, cache_dir, install
from tests.mesh.harness import REPO
from tests.orchestrator.mcp_server_tiers import READ_TOOLS

# The first run installs Node 22 and the Inspector with npm, which takes longer than a usual test.
pytestmark = [pytest.mark.scenario, pytest.mark.timeout(900)]
READ_TIER = sorted(READ_TOOLS)


@pytest.fixture(scope="module")
def inspector() -> Inspector:
    found = install(cache_dir())
    assert found.version() == INSPECTOR_VERSION
    return found


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "agents.yaml"
    python = sys.executable
    path.write_text(
        f"state_dir: {tmp_path / 'state'}\n"
        "servers:\n"
        f"  audit: {{transport: stdio, command: {python}, args: [-m, servers.audit]}}\n"
        "llm: {providers: {fake: {kind: openai_compat, base_url: 'http://127.0.0.1:9/v1', model: m}}}\n"
        "agents: [{id: nexo, model: {provider: fake}}]\n"
    )
    return path


def _over_http(url: str, token: str) -> list[str]:
    return [url, "--transport", "http", "--header", f"Authorization: Bearer {token}"]


def _names(listed: dict[str, list[dict[str, str]]]) -> list[str]:
    return sorted(tool["name"] for tool in listed["tools"])


def test_nexo_mcp_server_over_stdio_and_http(inspector: Inspector, tmp_path: Path) -> None:
    config = _config(tmp_path)
    # The Inspector takes --config for itself: the server gets its config from NEXO_CONFIG.
    stdio = [
        "-e",
        f"NEXO_CONFIG={config}",
        "--cwd",
        str(REPO),
        sys.executable,
        "-m",
        "orchestrator.cli.main",
        "mcp-server",
    ]
    token = secrets.token_urlsafe(16)
    assert _names(inspector.call(stdio, "tools/list")) == READ_TIER
    called = inspector.call(stdio, "tools/call", "--tool-name", "goals_list")
    with http_server(
        "orchestrator.cli.main", tmp_path / "state", token, ["mcp-server", "--config", str(config)]
    ) as url:
        assert _names(inspector.call(_over_http(url, token), "tools/list")) == READ_TIER
        over_http = inspector.call(_over_http(url, token), "tools/call", "--tool-name", "audit_verify")
    assert called["isError"] is False
    assert called["structuredContent"]["goals"] == []
    assert over_http["isError"] is False
    assert over_http["structuredContent"]["report"]["ok"] is True


def test_built_in_servers_over_stdio_and_http(inspector: Inspector, tmp_path: Path) -> None:
    token = secrets.token_urlsafe(16)
    now = ["--tool-name", "now", "--tool-arg", "timezone_name=UTC"]
    stdio = ["--cwd", str(REPO), sys.executable, "-m", "servers.time"]
    assert _names(inspector.call(stdio, "tools/list")) == ["convert", "now"]
    assert inspector.call(stdio, "tools/call", *now)["structuredContent"]["timezone"] == "UTC"
    with http_server("servers.audit", tmp_path / "audit", token) as url:
        assert _names(inspector.call(_over_http(url, token), "tools/list")) == [
            "agent_turns_tail",
            "audit_search",
        ]
        searched = inspector.call(
            _over_http(url, token), "tools/call", "--tool-name", "audit_search", "--tool-arg", "query=x"
        )
    assert searched["structuredContent"] == {"hits": []}
