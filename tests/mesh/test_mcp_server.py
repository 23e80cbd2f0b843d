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

from tests.fakes.llm import FakeLLM, Reply
from tests.mesh.harness import REPO, base_env, nexo_argv, python_server, running, stop, write_config

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
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _config(tmp_path: Path, llm_url: str) -> Path:
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={
            "console": python_server("channel_servers.console"),
            "audit": python_server("servers.audit"),
        },
    )


def _stdio(config: Path, *extra: str) -> StdioServerParameters:
    argv = nexo_argv("mcp-server", "--config", str(config), *extra)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=base_env(), cwd=str(REPO))


async def test_the_act_tier_runs_a_goal_through_the_daemon_with_progress_and_returns_its_answer(
    tmp_path: Path,
) -> None:
    steps: list[str] = []

    class Steps:
        async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
            steps.append(message or "")

    progress = Steps()

    with FakeLLM([Reply("the answer is 42")]) as llm, running(_config(tmp_path, llm.openai_base_url)) as orch:
        config = tmp_path / "agents.yaml"
        with anyio.fail_after(WAIT_S):
            async with Client(stdio_client(_stdio(config, "--tier", "act"))) as client:
                ran = await client.call_tool(
                    "goal_run", {"prompt": "what is the answer?"}, progress_callback=progress
                )
                assert ran.is_error is False, ran.content
                assert ran.structured_content is not None
                goal_id = ran.structured_content["goal_id"]
                listed = await client.call_tool("goals_list", {"include_finished": True})
                snapshot = await client.read_resource(f"nexo://goals/{goal_id}")
        assert orch.process.poll() is None
    assert ran.structured_content is not None
    assert {k: ran.structured_content[k] for k in ("agent", "status", "text")} == {
        "agent": "nexo",
        "status": "done",
        "text": "the answer is 42",
    }
    assert steps == ["started", "turn 1: answered"]
    assert listed.structured_content is not None
    assert [(g["id"], g["status"], g["origin"]["source"]) for g in listed.structured_content["goals"]] == [
        (goal_id, "done", "cli")
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


async def test_over_http_with_no_daemon_the_read_tier_answers_its_token_only(tmp_path: Path) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9/v1")
    stderr: list[str] = []
    with _http_server(config, stderr) as url:
        async with httpx2.AsyncClient(timeout=WAIT_S) as http:
            missing = await http.post(url, json=INITIALIZE, headers=ACCEPT)
            wrong = await http.post(url, json=INITIALIZE, headers={**ACCEPT, "Authorization": "Bearer nope"})
            host = url.split("/")[2]
            foreign = await http.post(
                url,
                json=INITIALIZE,
                headers={**ACCEPT, "Authorization": f"Bearer {TOKEN}", "Host": "evil.example:80"},
            )
            origin = await http.post(
                url,
                json=INITIALIZE,
                headers={
                    **ACCEPT,
                    "Authorization": f"Bearer {TOKEN}",
                    "Origin": "http://evil.example",
                    "Host": host,
                },
            )
        assert (missing.status_code, wrong.status_code, foreign.status_code, origin.status_code) == (
            401,
            401,
            421,
            403,
        )
        with anyio.fail_after(WAIT_S):
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                names = {tool.name for tool in (await client.list_tools()).tools}
                listed = await client.call_tool("goals_list", {})
                refused = await client.call_tool("goal_run", {"prompt": "x"})
    assert "goal_run" not in names
    assert "goals_list" in names
    assert listed.is_error is False
    assert listed.structured_content is not None
    assert listed.structured_content["goals"] == []
    assert refused.is_error is True
    imported = {line.rsplit("|", 1)[1].strip() for line in stderr if line.startswith("import time:")}
    assert "orchestrator.mcpserver.backend" in imported
    assert sorted(imported.intersection(MODEL_CLIENTS)) == []
