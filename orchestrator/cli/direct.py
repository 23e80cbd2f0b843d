"""Operator commands that talk to one server directly (a child process of the command, or an HTTP
service), so they work while ``nexo run`` is down: ``nexo audit``, ``nexo pair``, ``nexo cron``."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.cli.common import fail

if TYPE_CHECKING:
    from orchestrator.mesh import ServerConnection

CONNECT_TIMEOUT_S = 30.0
GIVE_UP_AFTER_FAILURES = 3

Action = Callable[["ServerConnection"], Awaitable[int]]


async def with_server(
    config: Any, name: str, action: Action, *, hint: str, env: Mapping[str, str] | None = None
) -> int:
    """Connect to the server ``name`` of ``config`` and run ``action``; errors become exit 1."""
    from mcp import MCPError

    from orchestrator.child_env import child_env
    from orchestrator.mesh import Mesh, ServerUnavailable

    server = config.servers.get(name)
    if server is None:
        return fail(f"the config has no {name!r} server; {hint}")
    base_env = {**child_env(config), **(env or {})}
    async with Mesh({name: server}, config.supervision, base_env=base_env) as mesh:
        connection = mesh[name]
        if not await ready(connection):
            return fail(
                f"the {name} server ({server.describe()}) is not reachable: "
                f"{connection.last_error or 'no answer'}; check servers.{name} in the config"
            )
        try:
            return await action(connection)
        except MCPError as exc:
            return fail(f"{name}: {exc.message}")
        except ServerUnavailable as exc:
            return fail(str(exc))


async def ready(connection: ServerConnection) -> bool:
    """Connected within the timeout; False as soon as the server has failed to start a few times,
    so a broken command or URL is reported in seconds rather than after the whole timeout."""
    from orchestrator.mesh import ServerUnavailable

    with anyio.move_on_after(CONNECT_TIMEOUT_S):
        while connection.client is None and connection.breaker.failures < GIVE_UP_AFTER_FAILURES:
            with contextlib.suppress(ServerUnavailable):
                await connection.wait_ready(0.1)
    return connection.client is not None
