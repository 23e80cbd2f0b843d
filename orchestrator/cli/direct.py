"""Operator commands that talk to servers directly (child processes of the command, or HTTP
services), so they work while ``nexo run`` is down: ``nexo audit``, ``nexo pair``, ``nexo cron`` (one
server each); ``nexo channel``, ``nexo dlq``, ``nexo setup doctor`` and ``nexo run --check-config``
(several, when no daemon holds them: :func:`started_unless_running`).

A built-in server is forked from a template this command forks of itself before its event loop
starts (as ``nexo run`` and ``nexo agent run`` do, even for one server): the server starts from the
SDK and the rest this command has imported already, instead of a fresh interpreter importing them
all again (about a second on a small machine, each).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.cli.common import fail, setup_logging

if TYPE_CHECKING:
    from orchestrator.mesh import ServerConnection
    from orchestrator.mesh.forkserver import ForkServer

CONNECT_TIMEOUT_S = 30.0
GIVE_UP_AFTER_FAILURES = 3

Action = Callable[["ServerConnection"], Awaitable[int]]


def run_with_server(
    config: Any, name: str, action: Action, *, hint: str, env: Mapping[str, str] | None = None
) -> int:
    """:func:`with_server` in an event loop of its own, a built-in server forked from a template
    forked of this process first (module docstring)."""
    server = config.servers.get(name)
    with started_early(config, {} if server is None else {name: server}, _server_env(config, env)) as forked:
        return anyio.run(partial(with_server, config, name, action, hint=hint, env=env, fork_server=forked))


@contextlib.contextmanager
def started_early(
    config: Any, servers: Mapping[str, Any], base_env: Mapping[str, str], *, start: bool = True
) -> Iterator[ForkServer | None]:
    """Before the event loop: a template forked of this process, asked at once for the built-in
    servers among ``servers`` (module docstring), or None when there is none to fork (``fork_server``
    off, or no built-in server); then this command's logging, configured after the fork so that the
    template starts from the interpreter's default (``orchestrator/mesh/template.py``). Give what it
    yields to the :class:`Mesh` of ``servers`` and ``base_env`` (or to each :class:`ServerConnection`,
    inside :func:`serving`); it is closed at the end of the block.

    ``start=False``: the servers are not asked for yet; each is forked when its connection opens
    (a connection that keeps its server's stderr for a report needs its own pipe for it)."""
    from orchestrator.mesh.mesh import early_fork_server, prestart

    fork_server = early_fork_server(servers, base_env=base_env, enabled=config.fork_server, alone=True)
    try:
        if fork_server is not None and start:
            prestart(fork_server, servers, base_env=base_env)
        setup_logging("WARNING")
        yield fork_server
    finally:
        if fork_server is not None:
            fork_server.close()


@contextlib.contextmanager
def started_unless_running(
    config: Any, servers: Mapping[str, Any], base_env: Mapping[str, str], *, start: bool = True
) -> Iterator[ForkServer | None]:
    """:func:`started_early` when no daemon listens on the config's state directory (the command
    then starts ``servers`` itself), else None: a running daemon holds them and is asked instead."""
    if daemon_listening(config.state_path):
        setup_logging("WARNING")
        yield None
        return
    with started_early(config, servers, base_env, start=start) as fork_server:
        yield fork_server


def daemon_listening(state_dir: Path) -> bool:
    """Whether a daemon accepts connections on the control socket of ``state_dir`` (before any event
    loop: a blocking connect to a local socket, answered at once either way)."""
    from orchestrator.sockets import control_path

    path = control_path(state_dir)
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False  # a socket left behind by a daemon that is gone
    return True


@contextlib.asynccontextmanager
async def serving(fork_server: ForkServer | None) -> AsyncIterator[None]:
    """Within the event loop: ``fork_server`` (from :func:`started_early`) serves the
    :class:`ServerConnection` objects made with it while the block runs (a :class:`Mesh` does this
    itself)."""
    if fork_server is None:
        yield
        return
    async with fork_server:
        yield


def _server_env(config: Any, env: Mapping[str, str] | None) -> dict[str, str]:
    from orchestrator.child_env import child_env

    return {**child_env(config), **(env or {})}


async def with_server(
    config: Any,
    name: str,
    action: Action,
    *,
    hint: str,
    env: Mapping[str, str] | None = None,
    fork_server: ForkServer | None = None,
) -> int:
    """Connect to the server ``name`` of ``config`` and run ``action``; errors become exit 1.
    ``fork_server``: the one :func:`run_with_server` made, which may have started the server."""
    from mcp import MCPError

    from orchestrator.mesh import Mesh, ServerUnavailable

    server = config.servers.get(name)
    if server is None:
        return fail(f"the config has no {name!r} server; {hint}")
    base_env = _server_env(config, env)
    mesh = Mesh({name: server}, config.supervision, base_env=base_env, fork_server=fork_server or False)
    async with mesh:
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
