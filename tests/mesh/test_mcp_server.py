"""``nexo mcp-server`` as a separate process, used by the official Python SDK client over stdio and HTTP."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult
from mcp_types.version import LATEST_MODERN_VERSION

from shared.protocol.console_wire import Approval, Say
from tests.fakes.llm import CallTool, FakeLLM, Reply, ScriptItem
from tests.mesh.console import next_frame
from tests.mesh.console import operator as open_operator
from tests.mesh.harness import REPO, base_env, nexo_argv, python_server, running, stop, write_config
from tests.orchestrator.mcp_server_tiers import READ_TOOLS

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]
WAIT_S = 60.0
TOKEN = "mcp-server-test-token"
URL_LINE = re.compile(r"serving MCP over HTTP at (http://\S+)")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
TOOLS_CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {
        "name": "goals_list",
        "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _config(tmp_path: Path, llm_url: str, notes: Path | None = None) -> Path:
    servers = {"console": python_server("channel_servers.console"), "audit": python_server("servers.audit")}
    if notes is not None:
        servers["notes"] = python_server("tests.fakes.notes_server", env={"NOTES_FILE": str(notes)})
    return write_config(
        tmp_path / "agents.yaml", state_dir=tmp_path / "state", llm_base_url=llm_url, servers=servers
    )


def _stdio(config: Path, *extra: str) -> StdioServerParameters:
    argv = nexo_argv("mcp-server", "--config", str(config), *extra)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=base_env(), cwd=str(REPO))


async def test_the_act_tier_runs_a_goal_through_the_daemon_whose_approval_the_operator_gives_on_the_console(
    tmp_path: Path,
) -> None:
    """The goal's tool call is asked about on the console, as for any goal; the MCP client, which has
    no tool to answer approvals, gets the progress and the outcome."""
    steps: list[str] = []

    class Steps:
        async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
            steps.append(message or "")

    notes = tmp_path / "notes.txt"
    script: list[ScriptItem] = [CallTool("notes__write_note", {"text": "buy milk"}), Reply("noted: buy milk")]
    with FakeLLM(script) as llm, running(_config(tmp_path, llm.openai_base_url, notes)) as orch:
        config = tmp_path / "agents.yaml"
        with anyio.fail_after(WAIT_S):
            async with (
                Client(stdio_client(_stdio(config, "--tier", "act"))) as client,
                open_operator(tmp_path / "state") as operator,
                anyio.create_task_group() as tg,
            ):
                ran: list[CallToolResult] = []

                async def run_goal() -> None:
                    ran.append(
                        await client.call_tool(
                            "goal_run", {"prompt": "note: buy milk"}, progress_callback=Steps()
                        )
                    )

                tg.start_soon(run_goal)
                asked = await next_frame(operator, Approval)
                await operator.send(Say(id="a1", text=f"yes {asked.request_id}"))
            async with Client(stdio_client(_stdio(config))) as reader:
                goal_id = ran[0].structured_content["goal_id"]
                listed = await reader.call_tool("goals_list", {"include_finished": True})
                snapshot = await reader.read_resource(f"nexo://goals/{goal_id}")
        assert orch.process.poll() is None
    assert asked.tool_name == "notes__write_note"
    assert notes.read_text() == "buy milk\n"
    outcome = ran[0].structured_content
    assert outcome is not None
    assert {k: outcome[k] for k in ("agent", "status", "text")} == {
        "agent": "nexo",
        "status": "done",
        "text": "noted: buy milk",
    }
    # Steps noted faster than they are relayed are coalesced; the first and the last always arrive.
    assert (steps[0], steps[-1]) == ("started", "turn 2: answered")
    assert set(steps) <= {"started", "running", "turn 1: tool_calls", "turn 2: answered"}
    assert listed.structured_content is not None
    assert [(g["id"], g["status"], g["origin"]["source"]) for g in listed.structured_content["goals"]] == [
        (goal_id, "done", "mcp-server")
    ]
    assert f'"id": "{goal_id}"' in snapshot.contents[0].text  # type: ignore[union-attr]


MODEL_CLIENTS = ("orchestrator.llm.anthropic", "orchestrator.llm.openai_compat", "orchestrator.daemon")
"""What the read tier must not import: the model clients and the daemon that builds them."""


@contextmanager
def _http_server(config: Path, found: list[str]) -> Iterator[str]:
    """``nexo mcp-server --http`` under ``python -X importtime``: its URL; ``found`` collects stderr."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-X",
            "importtime",
            *nexo_argv("mcp-server", "--config", str(config), "--http", "127.0.0.1:0")[1:],
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=base_env({"NEXO_SERVER_TOKEN": TOKEN}),
        cwd=REPO,
    )
    announced = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            found.append(line)
            if URL_LINE.search(line):
                announced.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert announced.wait(WAIT_S), "".join(found)
        match = next(m for m in map(URL_LINE.search, found) if m is not None)
        yield match.group(1)
    finally:
        stop(process)
        reader.join(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


async def test_over_http_with_no_daemon_the_read_tier_answers_its_token_only_in_both_protocol_eras(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9/v1")
    stderr: list[str] = []
    with _http_server(config, stderr) as url:
        host = url.split("/")[2]
        bearer = f"Bearer {TOKEN}"
        bad_credentials = {
            "no token": ({}, 401),
            "a wrong token": ({"Authorization": "Bearer nope"}, 401),
            "a foreign Host": ({"Authorization": bearer, "Host": "evil.example:80"}, 421),
            "a foreign Origin": (
                {"Authorization": bearer, "Host": host, "Origin": "http://evil.example"},
                403,
            ),
        }
        answered: dict[tuple[str, str], int] = {}
        async with httpx2.AsyncClient(timeout=WAIT_S) as http:
            for case, (headers, _) in bad_credentials.items():
                for body in (INITIALIZE, TOOLS_CALL):
                    sent = await http.post(url, json=body, headers={**ACCEPT, **headers})
                    answered[case, str(body["method"])] = sent.status_code
        assert answered == {
            (case, method): status
            for case, (_, status) in bad_credentials.items()
            for method in ("initialize", "tools/call")
        }
        with anyio.fail_after(WAIT_S):
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
                # The current era named outright: "auto" falls back to the handshake when its probe
                # times out on a loaded machine, which would test one era twice.
                Client(streamable_http_client(url, http_client=http), mode=LATEST_MODERN_VERSION) as client,
            ):
                names = {tool.name for tool in (await client.list_tools()).tools}
                current_era = client.protocol_version
                listed = await client.call_tool("goals_list", {})
                refused = await client.call_tool("goal_run", {"prompt": "x"})
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
                Client(streamable_http_client(url, http_client=http), mode="legacy") as handshake,
            ):
                era = (handshake.protocol_version, current_era)
                legacy_names = {tool.name for tool in (await handshake.list_tools()).tools}
    assert era[0] != era[1], "one client per protocol era"
    assert names == legacy_names == READ_TOOLS
    assert listed.is_error is False
    assert listed.structured_content is not None
    assert listed.structured_content["goals"] == []
    assert refused.is_error is True
    imported = {line.rsplit("|", 1)[1].strip() for line in stderr if line.startswith("import time:")}
    assert "orchestrator.mcpserver.backend" in imported
    assert sorted(imported.intersection(MODEL_CLIENTS)) == []
