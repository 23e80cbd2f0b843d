"""Opening one connection to a server: transport, handshake, tool list, and why an attempt failed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client import ClientExtension
from pydantic import BaseModel

from orchestrator.mesh.config import HttpServerConfig, StdioServerConfig
from orchestrator.mesh.errors import describe_error
from orchestrator.mesh.forkserver import ForkServer
from orchestrator.mesh.http_refusal import refusal
from orchestrator.mesh.lane import ClientLane
from orchestrator.mesh.pushed import NotificationHandler, PushedNotifications
from orchestrator.mesh.stderr_tail import StderrTail
from orchestrator.mesh.transport import http_client_for, open_transport
from shared.protocol.lane import LANE_EXTENSION

CONNECT_TIMEOUT_S = 30.0
CLIENT_INFO = types.Implementation(name="nexo-orchestrator", version="0.1.0")


class Opener:
    """Opens connections to one server, each with its resources on the caller's exit stack, and
    keeps what the last attempt learnt: an HTTP status that refused it, the server's last stderr line."""

    def __init__(
        self,
        name: str,
        *,
        base_env: Mapping[str, str],
        notifications: Mapping[str, type[BaseModel]],
        on_notification: NotificationHandler | None,
        fork_server: ForkServer | None,
        stderr_tail: StderrTail | None,
    ) -> None:
        self._name = name
        self._base_env = dict(base_env)
        self._notifications = dict(notifications)
        self._on_notification = on_notification
        self._fork_server = fork_server
        self._stderr_tail = stderr_tail
        self.refused: str | None = None
        """Why the server's HTTP answer ended the last connection (e.g. the token was refused)."""

    async def open(
        self, config: StdioServerConfig | HttpServerConfig, stack: AsyncExitStack, closed: anyio.Event
    ) -> tuple[Client, list[types.Tool], ClientLane | None]:
        """Connect and list tools; ``closed`` is set when the connection ends. The control lane
        comes back when the server is a forked child that advertises it (else None: the SDK's
        session carries every request)."""
        http = None
        self.refused = None
        if self._stderr_tail is not None:
            self._stderr_tail.forget()
        if isinstance(config, HttpServerConfig):
            http = await stack.enter_async_context(http_client_for(config))
            http.event_hooks = {"response": [self._status_watch(config, closed)]}
        lane = ClientLane() if isinstance(config, StdioServerConfig) else None
        extensions: list[ClientExtension] = []
        if self._notifications and self._on_notification is not None:
            extensions.append(PushedNotifications(self._name, self._notifications, self._on_notification))
        client = Client(
            open_transport(
                config,
                closed=closed,
                base_env=self._base_env,
                http_client=http,
                fork_server=self._fork_server,
                stderr_tail=self._stderr_tail,
                lane=lane,
            ),
            mode=config.protocol,
            extensions=extensions,
            cache=None,
            client_info=CLIENT_INFO,
            # Bounds the handshake; calls and long polls pass their own timeouts. (A cancel scope
            # around entering the client would wrap the transport's task group and cannot be used.)
            read_timeout_seconds=CONNECT_TIMEOUT_S,
        )
        await stack.enter_async_context(client)
        tools = await list_tools(client)
        settings = lane_settings(client)
        if lane is None or not lane.attached or settings is None:
            return client, tools, None
        lane.tools = frozenset(str(tool) for tool in settings.get("tools") or ())
        return client, tools, lane

    def _status_watch(
        self, config: HttpServerConfig, closed: anyio.Event
    ) -> Callable[[httpx2.Response], Awaitable[None]]:
        """Ends this connection on a status that says it is over (token refused, server stopping)."""

        async def watch(response: httpx2.Response) -> None:
            reason = refusal(response, token_origin=config.token_origin)
            if reason is not None and not closed.is_set():
                self.refused = reason
                closed.set()

        return watch

    def failure(self, exc: BaseException) -> str:
        """The reason an HTTP status gave, else the exception."""
        return self.refused or describe_error(exc)

    def start_failure(self, exc: BaseException) -> str:
        """Why a server never got ready: its own last line on stderr when it said one (kept with
        ``keep_stderr``), else :meth:`failure`."""
        said = self._stderr_tail.last_line if self._stderr_tail is not None else None
        return self.refused or said or describe_error(exc)


def lane_settings(client: Client) -> dict[str, Any] | None:
    """The server's ``nexo/lane`` settings (its 2026-07-28 extension or handshake-era experimental
    capability); None when it does not serve the control lane."""
    caps = client.server_capabilities
    for advertised in (caps.extensions or {}, caps.experimental or {}):
        settings = advertised.get(LANE_EXTENSION)
        if isinstance(settings, dict):
            return settings
    return None


async def list_tools(client: Client) -> list[types.Tool]:
    """Every page of the server's tools (at most 100 pages)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools
