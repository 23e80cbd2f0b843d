"""The webhook server as a real process: ``python -m channel_servers.webhook`` over stdio."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import MCPError, StdioServerParameters
from mcp.client import Client

from shared.protocol.events import Event, PullParams, PullRequest, PullResult
from tests.channel_servers.webhook.conftest import ENV, SOURCES, body_for, sign
from tests.mesh.harness import REPO, child_pids

pytestmark = pytest.mark.anyio


def server_params(state_dir: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")}
    env.update(
        {
            "NEXO_WEBHOOK_STATE_DIR": str(state_dir),
            "NEXO_WEBHOOK_PORT": "0",
            "NEXO_WEBHOOK_SOURCES": json.dumps(SOURCES[:2]),
            "GITHUB_SECRET": ENV["GITHUB_SECRET"],
            "STRIPE_SECRET": ENV["STRIPE_SECRET"],
            "NEXO_LOG_LEVEL": "WARNING",
        }
    )
    return StdioServerParameters(
        command=sys.executable, args=["-m", "channel_servers.webhook"], env=env, cwd=str(REPO)
    )


async def source_urls(client: Client) -> dict[str, str]:
    listed = (await client.call_tool("list_sources", {})).structured_content or {}
    return {source["name"]: source["url"] for source in listed["sources"]}


async def pull_all(client: Client) -> list[Event]:
    events: list[Event] = []
    while True:
        after = events[-1].seq if events else 0
        batch = await client.session.send_request(
            PullRequest(params=PullParams(after=after, limit=500, wait_ms=1_000)), PullResult
        )
        events += batch.events
        if not batch.events:
            return events


async def test_the_server_runs_over_stdio_and_stores_verified_webhooks(tmp_path: Path) -> None:
    now = time.time()
    github, stripe = body_for("github", "g-1"), body_for("stripe", "evt_1")
    with anyio.fail_after(60):
        async with Client(server_params(tmp_path)) as client, httpx2.AsyncClient() as http:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            urls = await source_urls(client)
            accepted = await http.post(
                urls["github"], content=github, headers=sign("github", github, "g-1", now)
            )
            signed = await http.post(
                urls["stripe"], content=stripe, headers=sign("stripe", stripe, "evt_1", now)
            )
            forged = await http.post(
                urls["github"], content=github, headers={"X-Hub-Signature-256": "sha256=0"}
            )
            events = await client.session.send_request(
                PullRequest(params=PullParams(wait_ms=10_000)), PullResult
            )
    assert tools == ["send_message", "list_sources"]
    assert (accepted.status_code, signed.status_code, forged.status_code) == (202, 202, 401)
    assert [event.dedupe_key for event in events.events] == ["webhook:github:g-1", "webhook:stripe:evt_1"]
    assert (tmp_path / "webhook" / "webhook.db").stat().st_mode & 0o777 == 0o600


@pytest.mark.scenario
async def test_every_acknowledged_webhook_survives_a_kill_9_of_the_server(tmp_path: Path) -> None:
    acknowledged: list[str] = []
    enough = anyio.Event()

    async def sender(url: str, worker: int) -> None:
        async with httpx2.AsyncClient() as http:
            for i in range(10_000):
                delivery = f"w{worker}-{i}"
                body = body_for("github", delivery)
                try:
                    response = await http.post(url, content=body, headers=sign("github", body, delivery, 0))
                except httpx2.TransportError:
                    return
                if response.status_code == 202:
                    acknowledged.append(delivery)
                if len(acknowledged) >= 200:
                    enough.set()

    with anyio.fail_after(90):
        try:
            async with Client(server_params(tmp_path)) as client, anyio.create_task_group() as tg:
                url = (await source_urls(client))["github"]
                for worker in range(6):
                    tg.start_soon(sender, url, worker)
                await enough.wait()
                [pid] = child_pids(os.getpid(), "channel_servers.webhook")
                os.kill(pid, signal.SIGKILL)
        except* (MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        async with Client(server_params(tmp_path)) as client:
            stored = [event.dedupe_key for event in await pull_all(client)]
    assert len(acknowledged) >= 200
    assert [key for key in (f"webhook:github:{d}" for d in acknowledged) if key not in stored] == []
    assert len(stored) == len(set(stored))


def test_a_port_in_use_stops_the_process_with_one_line_naming_the_setting(tmp_path: Path) -> None:
    params = server_params(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        finished = subprocess.run(
            [params.command, *params.args],
            env={**(params.env or {}), "NEXO_WEBHOOK_PORT": str(port), "PATH": os.environ["PATH"]},
            cwd=params.cwd,
            input="",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert (finished.returncode, finished.stderr) == (
        1,
        f"channel_servers.webhook: cannot listen for webhooks on 127.0.0.1:{port}: Address already in use; "
        "free the port or choose another with NEXO_WEBHOOK_PORT (and NEXO_WEBHOOK_HOST)\n",
    )
