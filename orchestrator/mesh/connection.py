"""One supervised MCP client: connect, watch, restart with backoff behind a circuit breaker.

How one attempt opens is :mod:`orchestrator.mesh.opening`; what a call's failure means is
:mod:`orchestrator.mesh.calls`; what status shows is :mod:`orchestrator.mesh.status`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from pydantic import BaseModel

from orchestrator.mesh.breaker import Breaker
from orchestrator.mesh.calls import R, call_tool, capability_names, send_request
from orchestrator.mesh.config import HttpServerConfig, StdioServerConfig, SupervisionConfig
from orchestrator.mesh.errors import ServerUnavailable
from orchestrator.mesh.forkserver import ForkServer
from orchestrator.mesh.lane import ClientLane
from orchestrator.mesh.opening import Opener, list_tools
from orchestrator.mesh.pushed import NotificationHandler
from orchestrator.mesh.status import ServerSnapshot, ServerState
from orchestrator.mesh.stderr_tail import StderrTail

logger = logging.getLogger("nexo.mesh")


class ServerConnection:
    def __init__(
        self,
        name: str,
        config: StdioServerConfig | HttpServerConfig,
        supervision: SupervisionConfig,
        *,
        base_env: Mapping[str, str] | None = None,
        notifications: Mapping[str, type[BaseModel]] | None = None,
        on_notification: NotificationHandler | None = None,
        clock: Callable[[], float] = time.monotonic,
        fork_server: ForkServer | None = None,
        keep_stderr: bool = False,
    ) -> None:
        self.name = name
        self.stderr_tail = StderrTail() if keep_stderr else None
        """The last line a stdio server wrote on stderr (``keep_stderr``), for reports of a failed start."""
        self.config = config
        self._supervision = supervision
        self._opener = Opener(
            name,
            base_env=base_env or {},
            notifications=notifications or {},
            on_notification=on_notification,
            fork_server=fork_server,
            stderr_tail=self.stderr_tail,
        )
        self._clock = clock
        self.breaker = Breaker(supervision, opens=not isinstance(config, HttpServerConfig))
        self.state: ServerState = "starting"
        self.last_error: str | None = None
        self.restarts = 0
        self.tools: list[types.Tool] = []
        self._client: Client | None = None
        self._lane: ClientLane | None = None
        self._ready = anyio.Event()
        self._closed = anyio.Event()
        self._next_try_at: float | None = None

    # -- supervision -------------------------------------------------------------------------

    async def run(self) -> None:
        """Keep the server connected until cancelled."""
        try:
            while True:
                delay = self.breaker.next_delay()
                if delay > 0:
                    self.state = "open" if self.breaker.state == "half_open" else "backoff"
                    logger.info(
                        "server %s: next connect in %.2fs (%s)",
                        self.name,
                        delay,
                        self.state,
                        extra={"server": self.name},
                    )
                    self._next_try_at = self._clock() + delay
                    try:
                        await anyio.sleep(delay)
                    finally:
                        self._next_try_at = None
                await self._connect_once()
        finally:
            self.state = "stopped"
            self._client = None

    async def _open(self, stack: AsyncExitStack) -> Client:
        """Connect and list tools, with every resource on ``stack``."""
        client, self.tools, self._lane = await self._opener.open(self.config, stack, self._closed)
        return client

    @property
    def refused(self) -> str | None:
        """Why the server's HTTP answer ended the last connection (e.g. the token was refused)."""
        return self._opener.refused

    async def probe(self) -> str | None:
        """Connect once and disconnect: None when it worked, else why not (for --check-config)."""
        self._closed = anyio.Event()
        try:
            async with AsyncExitStack() as stack:
                await self._open(stack)
        except Exception as exc:  # noqa: BLE001 -- reported to the operator, who fixes the config
            return self._opener.start_failure(exc)
        return None

    async def describe_once(self) -> dict[str, Any]:
        """Connect once: capabilities and the server's own name, or the error (for doctors)."""
        self._closed = anyio.Event()
        try:
            async with AsyncExitStack() as stack:
                client = await self._open(stack)
                self._client = client
                try:
                    info = client.server_info
                    return {
                        "capabilities": list(self.capability_names()),
                        "server_name": info.name if info is not None else None,
                        "error": None,
                    }
                finally:
                    self._client = None
        except Exception as exc:  # noqa: BLE001 -- reported to the operator, who fixes the config
            return {
                "capabilities": None,
                "server_name": None,
                "error": self._opener.start_failure(exc),
                "failed": True,
            }

    def describe_live(self) -> dict[str, Any]:
        client = self._client
        if client is None:
            return {
                "capabilities": None,
                "server_name": None,
                "error": self.last_error or self.state,
                "failed": self.last_error is not None,
            }
        info = client.server_info
        return {
            "capabilities": list(self.capability_names()),
            "server_name": info.name if info is not None else None,
            "tools": sorted(tool.name for tool in self.tools),
            "error": None,
        }

    async def _connect_once(self) -> None:
        self.state = "starting"
        self._closed = anyio.Event()
        connected_at: float | None = None
        try:
            async with AsyncExitStack() as stack:
                client = await self._open(stack)
                connected_at = self._clock()
                self._client = client
                self.state = "ready"
                self.last_error = None
                self._ready.set()
                logger.info(
                    "server %s ready: %d tools (%s)", self.name, len(self.tools), client.protocol_version
                )
                await self._watch(client)
                self.last_error = (
                    self._opener.refused or "connection closed (the server exited or the network dropped)"
                )
        except Exception as exc:  # noqa: BLE001 -- the supervisor is the boundary: any failure means reconnect
            failed = self._opener.failure if connected_at is not None else self._opener.start_failure
            self.last_error = failed(exc)
        finally:
            self._client = None
            self._lane = None
            if self._ready.is_set():
                self._ready = anyio.Event()
        if connected_at is not None:
            self.restarts += 1
        if connected_at is not None and self._clock() - connected_at >= self._supervision.stable_after_s:
            self.breaker.record_stable()
        else:
            self.breaker.record_failure()
        logger.warning("server %s: %s", self.name, self.last_error, extra={"server": self.name})

    async def _watch(self, client: Client) -> None:
        """Return when the transport closes or a health ping fails."""
        async with anyio.create_task_group() as tg:

            async def ping() -> None:
                while True:
                    await anyio.sleep(self._supervision.health_interval_s)
                    # tools/list rather than ping: ping is gone from the 2026-07-28 protocol.
                    with anyio.fail_after(self._supervision.health_interval_s):
                        self.tools = await list_tools(client)

            async def closed() -> None:
                await self._closed.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(ping)
            tg.start_soon(closed)

    # -- use ---------------------------------------------------------------------------------

    @property
    def client(self) -> Client | None:
        return self._client

    @property
    def lane_tools(self) -> frozenset[str]:
        """The tools whose calls take the control lane on this connection (none without a lane)."""
        return self._lane.tools if self._client is not None and self._lane is not None else frozenset()

    @property
    def on_lane(self) -> bool:
        """Whether control requests go on the control lane (a forked server that advertises it)."""
        return self._client is not None and self._lane is not None

    async def wait_ready(self, timeout: float | None = None) -> Client:
        client = self._client
        if client is not None and not self._closed.is_set():
            return client  # ready: no deadline to set up (every request asks)
        wait = self.config.connect_wait_s if timeout is None else timeout
        with anyio.move_on_after(wait):
            while self._client is None or self._closed.is_set():
                if self._ready.is_set():
                    # Closed but not yet torn down by the supervisor: let it catch up.
                    await anyio.sleep(0.05)
                else:
                    await self._ready.wait()
        if self._client is None or self._closed.is_set():
            raise ServerUnavailable(
                f"server {self.name!r} is {self.state} ({self.last_error or 'not connected yet'}); "
                f"check `nexo status` and the server's log on stderr"
            )
        return self._client

    async def wait_closed(self) -> None:
        """Return when the current connection is gone (the supervisor then reconnects)."""
        await self._closed.wait()

    def capability_names(self) -> tuple[str, ...]:
        client = self._client
        return () if client is None else capability_names(client)

    def has_capability(self, name: str) -> bool:
        return name in self.capability_names()

    async def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        client = await self.wait_ready()
        limit = timeout or self.config.call_timeout_s
        lane = self._lane
        return await call_tool(
            lane if lane is not None and tool in lane.tools else client,
            self.name,
            tool,
            arguments,
            limit=limit,
            meta=meta,
            closed=self._closed,
        )

    async def request(self, request: types.Request[Any, Any], result_type: type[R], *, timeout: float) -> R:
        """A control-plane request (never a tool): events pull/ack, permission relay, ...; on the
        control lane when the connection has one (``orchestrator.mesh.lane``)."""
        client = await self.wait_ready()
        return await send_request(
            self._lane or client, self.name, request, result_type, timeout=timeout, closed=self._closed
        )

    def snapshot(self) -> ServerSnapshot:
        client = self._client
        return ServerSnapshot(
            name=self.name,
            transport=self.config.transport,
            target=self.config.describe(),
            state=self.state,
            tools=len(self.tools) if client is not None else 0,
            last_error=self.last_error,
            restarts=self.restarts,
            breaker=self.breaker.state,
            protocol_version=client.protocol_version if client is not None else None,
            capabilities=self.capability_names(),
            next_try_in_s=None
            if self._next_try_at is None
            else round(max(0.0, self._next_try_at - self._clock()), 1),
        )
