"""Resource change notifications of ``nexo mcp-server`` (handshake era), seen by the SDK's client.

The daemon runs in this process with real memory, audit and inbox servers; the client subscribes to
MEMORY.md and to a goal, the goal edits MEMORY.md through the agent's own tool and ends, and each
change arrives as a notification within a bounded wait.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import IncomingMessage

from orchestrator.config.loading import load
from orchestrator.daemon.orchestrator import Orchestrator
from orchestrator.mcpserver.backend import Backend
from orchestrator.mcpserver.server import build_server
from orchestrator.sockets import control_path
from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, Step
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.harness import python_server, write_config
from tests.mesh.inbox import inbox_server
from tests.orchestrator.daemon_support import daemon_in_process

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]
WAIT_S = 60.0
MEMORY_URI = "nexo://agents/nexo/MEMORY.md"


class HeldModel:
    """Notes one line in MEMORY.md, but only once the test released it (its subscriptions are made)."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def __call__(self, request: RecordedRequest) -> ModelReply | Step:
        if request.body["messages"][-1]["role"] == "tool":
            return ModelReply("noted")
        self.released.wait(timeout=WAIT_S)
        note = {"op": "append", "section": "Preferences", "text": "tea, no sugar"}
        return Step(tool_calls=(CallTool("memory__memory_note", note),))


@asynccontextmanager
async def _daemon(tmp_path: Path, llm_url: str) -> AsyncIterator[Orchestrator]:
    config_path = write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={
            "inbox": inbox_server(tmp_path),
            "audit": python_server("servers.audit"),
            "memory": python_server("servers.memory"),
        },
        agent={"channels": ["inbox"], "permissions": {"tools": {"memory__memory_note": "safe"}}},
        extra={"operator": {"channel": "inbox", "chat_id": "op"}},
    )
    orch = Orchestrator(load(config_path), config_label=str(config_path))
    async with daemon_in_process(orch, WAIT_S):
        yield orch


# The SDK's client warns that 2026-07-28 removed resources/subscribe; this is the handshake era's own.
@pytest.mark.filterwarnings("ignore:resources/subscribe is removed:UserWarning")
async def test_subscribers_hear_of_memory_md_and_goal_changes_and_listers_of_goals_ending(
    tmp_path: Path,
) -> None:
    model = HeldModel()
    heard, hearing = anyio.create_memory_object_stream[types.ServerNotification](100)

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceUpdatedNotification | types.ResourceListChangedNotification):
            await heard.send(message)

    async def next_heard() -> str:
        note = await hearing.receive()
        return note.params.uri if isinstance(note, types.ResourceUpdatedNotification) else "list_changed"

    with FakeLLM(default=model) as llm, heard, hearing:
        async with _daemon(tmp_path, llm.openai_base_url) as orch:
            config = orch.config
            server = build_server(config, Backend(config, control_path(config.state_path)), "act")
            async with Client(server, mode="legacy", message_handler=on_message) as client:
                with anyio.fail_after(WAIT_S):
                    capabilities = client.server_capabilities.resources
                    started = await client.call_tool(
                        "goal_run", {"prompt": "remember: tea", "background": True}
                    )
                    assert started.structured_content is not None, started.content
                    goal_uri = f"nexo://goals/{started.structured_content['goal_id']}"
                    listed = await client.list_resources()
                    await client.subscribe_resource(MEMORY_URI)
                    await client.subscribe_resource(goal_uri)
                    unknown = await _refused(client, "nexo://agents/other/MEMORY.md")
                    model.released.set()
                    # The goal ends: MEMORY.md changed, its snapshot changed, and it left the active list.
                    got = {await next_heard() for _ in range(3)}
                    memory = await client.read_resource(MEMORY_URI)
    assert capabilities is not None
    assert (capabilities.subscribe, capabilities.list_changed) == (True, True)
    assert [str(r.uri) for r in listed.resources] == [MEMORY_URI, goal_uri]
    assert got == {MEMORY_URI, goal_uri, "list_changed"}
    assert "tea, no sugar" in memory.contents[0].text  # type: ignore[union-attr]
    assert unknown.startswith("no resource 'nexo://agents/other/MEMORY.md' to subscribe to")


async def _refused(client: Client, uri: str) -> str:
    from mcp import MCPError

    try:
        await client.subscribe_resource(uri)
    except MCPError as exc:
        return exc.message
    raise AssertionError(f"subscribing to {uri} was accepted")
