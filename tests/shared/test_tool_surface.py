"""What an outside MCP client sees of every built-in server, through the in-memory client.

Every tool has a title and a clean description; every parameter is described; every number is
bounded; no input schema accepts properties it does not name; the server reports nexo's version
and advertises only what it serves.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning

from channel_servers.console.server import build_server as build_console
from channel_servers.console.settings import ConsoleSettings
from channel_servers.sample.server import WebChat
from channel_servers.sample.server import build_server as build_sample
from channel_servers.sample.settings import SampleSettings
from channel_servers.webhook.server import build_server as build_webhook
from channel_servers.webhook.settings import WebhookSettings
from servers.audit.server import build_server as build_audit
from servers.audit.settings import AuditSettings
from servers.cron.server import build_server as build_cron
from servers.cron.settings import CronSettings
from servers.memory.embeddings import Embedder, EmbeddingSettings, build_embedder
from servers.memory.server import build_server as build_memory
from servers.memory.settings import MemorySettings
from servers.pairing.server import build_server as build_pairing
from servers.pairing.settings import PairingSettings
from servers.time.server import build_server as build_time
from servers.time.settings import TimeSettings
from servers.workspace.server import build_server as build_workspace
from servers.workspace.settings import WorkspaceSettings
from shared.protocol.policy import READ_ONLY_HINTS
from shared.serverkit import NexoServer
from tests.channel_servers.webhook.conftest import ENV, SOURCES, Captured

pytestmark = pytest.mark.anyio

Build = Callable[[Path, Embedder], MCPServer[Any]]

BUILDERS: dict[str, Build] = {
    "time": lambda _, __: build_time(TimeSettings()),
    "audit": lambda tmp, _: build_audit(AuditSettings(state_dir=tmp)),
    "cron": lambda tmp, _: build_cron(CronSettings(state_dir=tmp), run_scheduler=False),
    "memory": lambda tmp, embedder: build_memory(MemorySettings(state_dir=tmp), embedder=embedder),
    "pairing": lambda tmp, _: build_pairing(PairingSettings(state_dir=tmp)),
    "workspace": lambda tmp, _: build_workspace(WorkspaceSettings(state_dir=tmp, sandbox="none")),
    "console": lambda tmp, _: build_console(ConsoleSettings(NEXO_CONSOLE_STATE_DIR=tmp)),
    "webhook": lambda tmp, _: build_webhook(
        WebhookSettings(state_dir=tmp, sources=SOURCES, port=0), environ=ENV, listener=Captured()
    ),
    "sample": lambda tmp, _: build_sample(
        settings := SampleSettings(state_dir=tmp, port=0, token="t0ken-for-tests"), WebChat(settings)
    ),
}
WHITESPACE_RUN = re.compile(r"[ \t]{2,}|\n[ \t]")


@pytest.fixture(scope="module")
def embedder() -> Iterator[Embedder]:
    instance = build_embedder(EmbeddingSettings())
    anyio.run(instance.start)
    yield instance
    anyio.run(instance.aclose)


@asynccontextmanager
async def connected(name: str, tmp_path: Path, embedder: Embedder, **client: Any) -> AsyncIterator[Client]:
    async with Client(BUILDERS[name](tmp_path / "state", embedder), **client) as connection:
        yield connection


def schema_problems(where: str, schema: dict[str, Any]) -> Iterator[str]:
    """Every rule the test holds a tool's input schema to, walked through nested objects."""
    if schema.get("type") == "object" and schema.get("additionalProperties") is not False:
        yield f"{where}: allows additional properties"
    for name, prop in schema.get("properties", {}).items():
        at = f"{where}.{name}"
        if not prop.get("description"):
            yield f"{at}: no description"
        if "title" in prop:
            yield f"{at}: a generated title {prop['title']!r}"
        yield from value_problems(at, prop)
    for name, definition in schema.get("$defs", {}).items():
        yield from schema_problems(f"{where}.$defs.{name}", definition)


def value_problems(where: str, prop: dict[str, Any]) -> Iterator[str]:
    kinds = {prop.get("type")} | {arm.get("type") for arm in prop.get("anyOf", [])}
    if kinds & {"integer", "number"}:
        if "minimum" not in prop and "exclusiveMinimum" not in prop:
            yield f"{where}: no lower bound"
        if "maximum" not in prop and "exclusiveMaximum" not in prop:
            yield f"{where}: no upper bound"
    for arm in prop.get("anyOf", []):
        if arm.get("type") == "object":
            yield from schema_problems(where, arm)
    if prop.get("type") == "object":
        yield from schema_problems(where, prop)


def tool_problems(tool: types.Tool) -> Iterator[str]:
    if not tool.title:
        yield f"{tool.name}: no title"
    if not tool.description or WHITESPACE_RUN.search(tool.description):
        yield f"{tool.name}: description missing or carrying whitespace runs: {tool.description!r}"
    if tool.annotations is None:
        yield f"{tool.name}: no annotations"
    yield from schema_problems(tool.name, tool.input_schema)


@pytest.mark.parametrize("name", sorted(BUILDERS))
async def test_every_tool_is_titled_described_bounded_and_closed(
    name: str, tmp_path: Path, embedder: Embedder
) -> None:
    async with connected(name, tmp_path, embedder) as client:
        tools = (await client.list_tools()).tools
    assert [problem for tool in tools for problem in tool_problems(tool)] == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("name", sorted(BUILDERS))
async def test_each_server_reports_nexos_version_and_advertises_only_what_it_serves(
    name: str, mode: str, tmp_path: Path, embedder: Embedder
) -> None:
    async with connected(name, tmp_path, embedder, mode=mode) as client:
        info, capabilities = client.server_info, client.server_capabilities
    assert info is not None
    assert (info.name, info.version) == (name, version("nexo"))
    assert (capabilities.prompts, capabilities.resources, capabilities.completions) == (None, None, None)
    assert capabilities.tools is not None
    assert capabilities.tools.list_changed is False


async def test_an_unknown_argument_is_refused_naming_the_parameters_that_exist(
    tmp_path: Path, embedder: Embedder
) -> None:
    async with connected("time", tmp_path, embedder) as client:
        misspelt = await client.call_tool("now", {"tz": "Europe/Madrid"})
        other = await client.call_tool("now", {"timezone": "Europe/Madrid"})
    assert (misspelt.is_error, misspelt.content) == (
        True,
        [
            types.TextContent(
                type="text",
                text=(
                    "invalid arguments for now:\n"
                    "- tz: not a parameter of now; its parameters are: timezone_name"
                ),
            )
        ],
    )
    assert other.is_error is True


async def test_invalid_arguments_come_back_as_one_short_line_per_field_without_links(
    tmp_path: Path, embedder: Embedder
) -> None:
    async with connected("time", tmp_path, embedder) as client:
        result = await client.call_tool("convert", {"time_hhmm": "25:00", "source_timezone": 3})
    text = result.content[0].text if isinstance(result.content[0], types.TextContent) else ""
    assert (result.is_error, text.splitlines()) == (
        True,
        [
            "invalid arguments for convert:",
            "- time_hhmm: string should match pattern '^([01][0-9]|2[0-3]):[0-5][0-9]$'; got '25:00'",
            "- source_timezone: expected a valid string; got 3",
            "- target_timezone: required but missing",
        ],
    )


async def test_set_level_is_served_and_decides_which_log_messages_a_session_gets() -> None:
    server: NexoServer[Any] = NexoServer("probe", instructions="A server that logs at two levels.")

    @server.tool(title="Log twice", annotations=READ_ONLY_HINTS)
    async def log_twice(*, ctx: Context[Any]) -> str:
        """Log one info and one warning message to the caller."""
        await server.log_to_client(ctx, "info", "routine")
        await server.log_to_client(ctx, "warning", "unusual")
        return "logged"

    received: list[tuple[str, Any]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append((params.level, params.data))

    async with Client(server, mode="legacy", logging_callback=on_log) as client:
        assert client.server_capabilities.logging is not None
        await client.call_tool("log_twice", {})
        with pytest.warns(MCPDeprecationWarning):
            answered = await client.set_logging_level("warning")
        await client.call_tool("log_twice", {})
    assert answered == types.EmptyResult()
    assert received == [("info", "routine"), ("warning", "unusual"), ("warning", "unusual")]
