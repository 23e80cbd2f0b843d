"""One supervised MCP client: connect, watch, restart with backoff behind a circuit breaker."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.client import ClientExtension, NotificationBinding
from pydantic import BaseModel

from orchestrator.mesh.breaker import Breaker
from orchestrator.mesh.config import HttpServerConfig, StdioServerConfig, SupervisionConfig
from orchestrator.mesh.forkserver import ForkServer
from orchestrator.mesh.http_refusal import refusal
from orchestrator.mesh.stderr_tail import StderrTail
from orchestrator.mesh.transport import http_client_for, open_transport

logger = logging.getLogger("nexo.mesh")

ServerState = Literal["starting", "ready", "backoff", "open", "stopped"]
NotificationHandler = Callable[[str, str, BaseModel], Awaitable[None]]
"""(server name, method, params) for notifications a server pushes."""
R = TypeVar("R", bound=types.Result)

CONNECT_TIMEOUT_S = 30.0
CLIENT_INFO = types.Implementation(name="nexo-orchestrator", version="0.1.0")


class ServerUnavailable(Exception):
    """The server is not connected (restarting, breaker open, or it died during the call)."""


@dataclass(frozen=True, slots=True)
class ServerSnapshot:
    name: str
    transport: str
    target: str
    state: ServerState
    tools: int
    last_error: str | None
    restarts: int
    breaker: str
    protocol_version: str | None
    capabilities: tuple[str, ...]
    next_try_in_s: float | None = None
    """While waiting to reconnect (``backoff`` or ``open``): seconds until the next attempt."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "target": self.target,
            "state": self.state,
            "tools": self.tools,
            "last_error": self.last_error,
            "restarts": self.restarts,
            "breaker": self.breaker,
            "protocol_version": self.protocol_version,
            "capabilities": list(self.capabilities),
            "next_try_in_s": self.next_try_in_s,
        }


def describe_error(exc: BaseException) -> str:
    """One line for status and logs; unwraps the exception groups task groups produce."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_error(e) for e in exc.exceptions)
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


class _PushedNotifications(ClientExtension):
    """Claims the channel notifications a server pushes; the SDK drops unclaimed custom methods."""

    identifier = "nexo/channel"

    def __init__(
        self, server: str, methods: Mapping[str, type[BaseModel]], handler: NotificationHandler
    ) -> None:
        self._server = server
        self._methods = methods
        self._handler = handler

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        return [self._binding(method, params) for method, params in self._methods.items()]

    def _binding(self, method: str, params: type[BaseModel]) -> NotificationBinding[Any]:
        async def deliver(value: BaseModel) -> None:
            await self._handler(self._server, method, value)

        return NotificationBinding(method=method, params_type=params, handler=deliver)


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
        self._fork_server = fork_server
        self.config = config
        self._supervision = supervision
        self._base_env = dict(base_env or {})
        self._notifications = dict(notifications or {})
        self._on_notification = on_notification
        self._clock = clock
        self.breaker = Breaker(supervision, opens=not isinstance(config, HttpServerConfig))
        self.state: ServerState = "starting"
        self.last_error: str | None = None
        self.restarts = 0
        self.tools: list[types.Tool] = []
        self._client: Client | None = None
        self._ready = anyio.Event()
        self._closed = anyio.Event()
        self._refused: str | None = None
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
        http = None
        self._refused = None
        if self.stderr_tail is not None:
            self.stderr_tail.forget()
        if isinstance(self.config, HttpServerConfig):
            http = await stack.enter_async_context(http_client_for(self.config))
            http.event_hooks = {"response": [self._status_watch(self.config, self._closed)]}
        extensions: list[ClientExtension] = []
        if self._notifications and self._on_notification is not None:
            extensions.append(_PushedNotifications(self.name, self._notifications, self._on_notification))
        client = Client(
            open_transport(
                self.config,
                closed=self._closed,
                base_env=self._base_env,
                http_client=http,
                fork_server=self._fork_server,
                stderr_tail=self.stderr_tail,
            ),
            mode=self.config.protocol,
            extensions=extensions,
            cache=None,
            client_info=CLIENT_INFO,
            # Bounds the handshake; calls and long polls pass their own timeouts. (A cancel scope
            # around entering the client would wrap the transport's task group and cannot be used.)
            read_timeout_seconds=CONNECT_TIMEOUT_S,
        )
        await stack.enter_async_context(client)
        self.tools = await self._list_tools(client)
        return client

    def _status_watch(
        self, config: HttpServerConfig, closed: anyio.Event
    ) -> Callable[[httpx2.Response], Awaitable[None]]:
        """Ends this connection on a status that says it is over (token refused, server stopping)."""

        async def watch(response: httpx2.Response) -> None:
            reason = refusal(response, token_origin=config.token_origin)
            if reason is not None and not closed.is_set():
                self._refused = reason
                closed.set()

        return watch

    @property
    def refused(self) -> str | None:
        """Why the server's HTTP answer ended the last connection (e.g. the token was refused)."""
        return self._refused

    def _failure(self, exc: BaseException) -> str:
        """The reason an HTTP status gave, else the exception."""
        return self._refused or describe_error(exc)

    def _start_failure(self, exc: BaseException) -> str:
        """Why a server never got ready: its own last line on stderr when it said one (kept with
        ``keep_stderr``), else :meth:`_failure`."""
        said = self.stderr_tail.last_line if self.stderr_tail is not None else None
        return self._refused or said or describe_error(exc)

    async def probe(self) -> str | None:
        """Connect once and disconnect: None when it worked, else why not (for --check-config)."""
        self._closed = anyio.Event()
        try:
            async with AsyncExitStack() as stack:
                await self._open(stack)
        except Exception as exc:  # noqa: BLE001 -- reported to the operator, who fixes the config
            return self._start_failure(exc)
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
                "error": self._start_failure(exc),
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
                    self._refused or "connection closed (the server exited or the network dropped)"
                )
        except Exception as exc:  # noqa: BLE001 -- the supervisor is the boundary: any failure means reconnect
            self.last_error = self._failure(exc) if connected_at is not None else self._start_failure(exc)
        finally:
            self._client = None
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
                        self.tools = await self._list_tools(client)

            async def closed() -> None:
                await self._closed.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(ping)
            tg.start_soon(closed)

    @staticmethod
    async def _list_tools(client: Client) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    # -- use ---------------------------------------------------------------------------------

    @property
    def client(self) -> Client | None:
        return self._client

    async def wait_ready(self, timeout: float | None = None) -> Client:
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
        if client is None:
            return ()
        caps = client.server_capabilities
        names = {*(caps.experimental or {}), *(caps.extensions or {})}
        # 2026-07-28 has no experimental capabilities: the channel extension's settings say it.
        for ns in ("nexo", "claude"):
            if (caps.extensions or {}).get(f"{ns}/channel", {}).get("permission") is True:
                names.add(f"{ns}/channel/permission")
        return tuple(sorted(names))

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
        try:
            with anyio.fail_after(limit):
                return await client.call_tool(
                    tool,
                    dict(arguments),
                    read_timeout_seconds=limit,
                    meta=cast(types.RequestParamsMeta, dict(meta)) if meta else None,
                )
        except TimeoutError as exc:
            raise ServerUnavailable(f"{self.name}.{tool} did not answer within {limit:g}s") from exc
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED or self._closed.is_set():
                raise ServerUnavailable(
                    f"server {self.name!r} went away during {tool!r}; it is being restarted and the call "
                    "may or may not have taken effect"
                ) from exc
            raise

    async def request(self, request: types.Request[Any, Any], result_type: type[R], *, timeout: float) -> R:
        """A control-plane request (never a tool): events pull/ack, permission relay, ..."""
        client = await self.wait_ready()
        try:
            with anyio.fail_after(timeout + 5):
                result: R = await client.session.send_request(
                    request, result_type, request_read_timeout_seconds=timeout + 5
                )
                return result
        except TimeoutError as exc:
            raise ServerUnavailable(
                f"{self.name}: {request.method} did not answer within {timeout:g}s"
            ) from exc
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED or self._closed.is_set():
                raise ServerUnavailable(f"server {self.name!r} went away during {request.method}") from exc
            raise

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
