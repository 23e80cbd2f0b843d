"""All server connections of one orchestrator, supervised in one task group."""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup
from pydantic import BaseModel

from orchestrator.mesh.catalog import Catalog
from orchestrator.mesh.config import HttpServerConfig, StdioServerConfig, SupervisionConfig
from orchestrator.mesh.connection import ServerConnection
from orchestrator.mesh.fork_request import built_in_module
from orchestrator.mesh.forkserver import ForkServer
from orchestrator.mesh.pushed import NotificationHandler
from orchestrator.mesh.status import ServerSnapshot
from orchestrator.mesh.transport import early_requests, template_environment

MIN_SHARERS = 2
"""Built-in stdio servers needed before the mesh forks them from a template."""
Servers = Mapping[str, StdioServerConfig | HttpServerConfig]


def wants_template(servers: Servers, fork_server: bool, *, alone: bool = False) -> bool:
    """Whether a mesh of ``servers`` forks its built-in servers from a template; ``alone``: even one."""
    forkable = sum(
        isinstance(config, StdioServerConfig) and built_in_module(config) is not None
        for config in servers.values()
    )
    # One server alone shares nothing with a template: it would only add a process. A one-shot
    # command forks it anyway (``alone``), for the start: see ``orchestrator.cli.direct``.
    return fork_server and forkable >= (1 if alone else MIN_SHARERS)


def early_fork_server(
    servers: Servers,
    *,
    base_env: Mapping[str, str],
    enabled: bool,
    shared: Sequence[str] = (),
    alone: bool = False,
) -> ForkServer | None:
    """The fork server a mesh of ``servers`` would make (``alone``: even for one built-in server),
    its template forked from this process now (before the event loop starts:
    ``orchestrator/mesh/template.py``), once ``shared`` is imported here; None when it would make
    none. Give it to the :class:`Mesh` as its ``fork_server``."""
    if not wants_template(servers, enabled, alone=alone):
        return None
    made = ForkServer(template_environment(base_env))
    made.fork_template(shared)
    return made


def prestart(fork_server: ForkServer, servers: Servers, *, base_env: Mapping[str, str]) -> int:
    """Have the template start the built-in servers among ``servers`` now, before the event loop:
    each is adopted by its connection's first start. How many were started."""
    return fork_server.prestart(early_requests(servers, base_env), sys.stderr.fileno())


class Mesh:
    def __init__(
        self,
        servers: Mapping[str, StdioServerConfig | HttpServerConfig],
        supervision: SupervisionConfig | None = None,
        *,
        base_env: Mapping[str, str] | None = None,
        notifications: Mapping[str, type[BaseModel]] | None = None,
        on_notification: NotificationHandler | None = None,
        fork_server: bool | ForkServer = False,
        keep_stderr: bool = False,
    ) -> None:
        sup = supervision or SupervisionConfig()
        self._base_env = dict(base_env or {})
        self._catalogs: dict[
            tuple[tuple[str, ...], frozenset[tuple[str, str]]], tuple[dict[str, list[Any]], Catalog]
        ] = {}
        if isinstance(fork_server, ForkServer):
            self.fork_server: ForkServer | None = fork_server
        else:
            wanted = wants_template(servers, fork_server)
            self.fork_server = ForkServer(template_environment(self._base_env)) if wanted else None
        """The template built-in servers are forked from (``fork_server: true`` in the config), or
        the one :func:`early_fork_server` made."""
        self.connections = {
            name: ServerConnection(
                name,
                config,
                sup,
                base_env=base_env,
                notifications=notifications,
                on_notification=on_notification,
                fork_server=self.fork_server,
                keep_stderr=keep_stderr,
            )
            for name, config in servers.items()
        }
        self._tg: TaskGroup | None = None
        self._stack = AsyncExitStack()

    def fork_template(self, shared: Sequence[str] = ()) -> None:
        """Fork the fork server's template from this process now (``orchestrator/mesh/template.py``),
        once ``shared`` is imported here: call it before the event loop starts. Without it, or where
        it cannot fork, the template is spawned when the first built-in server starts."""
        if self.fork_server is not None:
            self.fork_server.fork_template(shared)

    def prestart(self) -> int:
        """After :meth:`fork_template`, before the event loop: start the built-in servers now
        (:func:`prestart`); those whose stderr the mesh keeps are started at :meth:`__aenter__`."""
        if self.fork_server is None:
            return 0
        servers = {n: c.config for n, c in self.connections.items() if c.stderr_tail is None}
        return prestart(self.fork_server, servers, base_env=self._base_env)

    async def __aenter__(self) -> Mesh:
        if self.fork_server is not None:
            await self._stack.enter_async_context(self.fork_server)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        for connection in self.connections.values():
            self._tg.start_soon(connection.run, name=f"mesh:{connection.name}")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        try:
            return await self._tg.__aexit__(exc_type, exc, tb)
        finally:
            await self._stack.aclose()

    def __getitem__(self, name: str) -> ServerConnection:
        return self.connections[name]

    def get(self, name: str) -> ServerConnection | None:
        return self.connections.get(name)

    async def wait_ready(self, timeout: float, names: Collection[str] | None = None) -> list[str]:
        """Wait until the named (default: all) servers are ready; return those that are not."""
        wanted = [self.connections[n] for n in (names if names is not None else self.connections)]
        with anyio.move_on_after(timeout):
            for connection in wanted:
                while connection.client is None:
                    try:
                        await connection.wait_ready(timeout)
                    except Exception:  # noqa: BLE001, S112 -- keep waiting until the overall deadline
                        continue
        return [c.name for c in wanted if c.client is None]

    def snapshots(self) -> list[ServerSnapshot]:
        return [c.snapshot() for c in self.connections.values()]

    def catalog(
        self, *, allowed: Sequence[str] = ("*",), hidden: Collection[tuple[str, str]] = ()
    ) -> Catalog:
        tools = {name: c.tools for name, c in self.connections.items() if c.client is not None}
        # Built again only when a server's tool list changed (a new list at each listing) or the
        # filter did: every goal asks, the lists change at a connect or a health check's listing.
        key = (tuple(allowed), frozenset(hidden))
        cached = self._catalogs.get(key)
        if cached is not None and _same_lists(cached[0], tools):
            return cached[1]
        catalog = Catalog.build(tools, allowed=allowed, hidden=hidden)
        self._catalogs[key] = (tools, catalog)
        return catalog


def _same_lists(before: Mapping[str, list[Any]], now: Mapping[str, list[Any]]) -> bool:
    return before.keys() == now.keys() and all(before[name] is now[name] for name in now)
