"""Where ``nexo mcp-server`` gets its answers: the running daemon, or servers it starts itself.

With ``nexo run`` up every call goes through the daemon's control socket, so goals share the
daemon's mesh, approvals and budgets, and reads share its server processes. Without it the reads
start the one server they need (audit, memory, cron or pairing, as the config names them) on first
use and keep it until the mcp-server exits; what only a running agent can do is refused with the
command that starts one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from anyio.abc import TaskGroup

from orchestrator.control import ask, ask_with_progress

if TYPE_CHECKING:
    from orchestrator.config.nexo import NexoConfig
    from orchestrator.mesh import ServerConnection
    from orchestrator.mesh.config import ServerConfig

R = TypeVar("R", bound=types.Result)
READ_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 30.0
DAEMON_PROBE_S = 2.0
NEEDS_DAEMON = (
    "this needs the running agent, and none is running for this config: start it with `nexo run` "
    "(same --config), then call again"
)


class NeedsDaemon(Exception):
    """An act-tier call with no ``nexo run`` to carry it out."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}: {NEEDS_DAEMON}")


class BackendError(Exception):
    """A server or the daemon refused or failed the call; the message says which and why."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class Backend:
    """One per mcp-server process; :meth:`opened` owns the servers it started."""

    def __init__(self, config: NexoConfig, control: Path) -> None:
        self.config = config
        self.control = control
        self._servers: TaskGroup | None = None
        self._connections: dict[str, ServerConnection] = {}
        self._starting = anyio.Lock()
        self.on_change: Callable[[], None] = lambda: None
        """Called after each call that may have changed something (the resource watch looks again)."""

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[Backend]:
        async with anyio.create_task_group() as servers:
            self._servers = servers
            try:
                yield self
            finally:
                self._servers = None
                self._connections.clear()
                servers.cancel_scope.cancel()

    async def daemon_running(self) -> bool:
        try:
            await ask(self.control, "status", DAEMON_PROBE_S)
        except (OSError, TimeoutError, ValueError):
            return False
        return True

    async def control_op(self, request: dict[str, Any], what: str) -> dict[str, Any]:
        """A daemon-only operation; NeedsDaemon when no daemon answers."""
        try:
            answer = await ask(self.control, request, timeout=None)
        except OSError:
            raise NeedsDaemon(what) from None
        finally:
            self.on_change()
        return _checked(answer)

    async def followed_run(
        self, request: dict[str, Any], on_progress: Callable[[dict[str, Any]], Awaitable[None]]
    ) -> dict[str, Any]:
        try:
            answer = await ask_with_progress(self.control, request, on_progress)
        except OSError:
            raise NeedsDaemon("running a goal") from None
        finally:
            self.on_change()
        return _checked(answer)

    async def request(self, server: str, request: types.Request[Any, Any], result_type: type[R]) -> R:
        """A control-plane request to ``server``: through the daemon if one runs, else directly."""
        try:
            answer = await ask(self.control, _relayed(server, request), timeout=READ_TIMEOUT_S + 5)
        except OSError:
            return await self._direct(server, request, result_type)
        return result_type.model_validate(_checked(answer)["result"])

    async def tool(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A read-only server tool's structured result: through the daemon if one runs, else directly."""
        try:
            answer = await ask(
                self.control,
                {"op": "tool", "server": server, "tool": tool, "arguments": arguments},
                timeout=READ_TIMEOUT_S + 5,
            )
        except OSError:
            return await self._direct_tool(server, tool, arguments)
        result: dict[str, Any] = _checked(answer)["result"]
        return result

    async def daemon_request(
        self, server: str, request: types.Request[Any, Any], result_type: type[R], what: str
    ) -> R:
        """A request that changes something: only through the running daemon."""
        answer = await self.control_op(_relayed(server, request), what)
        return result_type.model_validate(answer["result"])

    async def _direct_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        from mcp import MCPError

        from orchestrator.mesh import ServerUnavailable

        connection = await self._connection(server)
        try:
            result = await connection.call_tool(tool, arguments, timeout=READ_TIMEOUT_S)
        except MCPError as exc:
            raise BackendError(f"{server}: {exc.message}", exc.code) from exc
        except ServerUnavailable as exc:
            raise BackendError(str(exc)) from exc
        if result.is_error:
            raise BackendError(" ".join(getattr(block, "text", "") for block in result.content).strip())
        return result.structured_content or {}

    async def _direct(self, server: str, request: types.Request[Any, Any], result_type: type[R]) -> R:
        from mcp import MCPError

        from orchestrator.mesh import ServerUnavailable

        connection = await self._connection(server)
        try:
            return await connection.request(request, result_type, timeout=READ_TIMEOUT_S)
        except MCPError as exc:
            raise BackendError(f"{server}: {exc.message}", exc.code) from exc
        except ServerUnavailable as exc:
            raise BackendError(str(exc)) from exc

    async def _connection(self, name: str) -> ServerConnection:
        """The connection to ``name``, started on first use and kept until the backend closes."""
        from orchestrator.cli.direct import ready

        async with self._starting:
            connection = self._connections.get(name)
            if connection is None:
                server = self.config.servers.get(name)
                if server is None:
                    raise BackendError(f"the config has no {name!r} server; add servers.{name} to it")
                if self._servers is None:
                    raise RuntimeError("Backend.opened() is not entered")
                connection = await self._servers.start(self._hold, name, server)
                self._connections[name] = connection
            if not await ready(connection):
                raise BackendError(
                    f"the {name} server ({connection.config.describe()}) is not reachable: "
                    f"{connection.last_error or 'no answer'}; check servers.{name} in the config"
                )
            return connection

    async def _hold(
        self, name: str, server: ServerConfig, *, task_status: anyio.abc.TaskStatus[ServerConnection]
    ) -> None:
        """The server's mesh lives in this task until the backend closes."""
        from orchestrator.child_env import child_env
        from orchestrator.mesh import Mesh

        async with Mesh({name: server}, self.config.supervision, base_env=child_env(self.config)) as mesh:
            task_status.started(mesh[name])
            await anyio.sleep_forever()


def _relayed(server: str, request: types.Request[Any, Any]) -> dict[str, Any]:
    """The control socket's ``request`` op carrying ``request`` to ``server``."""
    params = request.params
    payload = params.model_dump(mode="json", by_alias=True, exclude_none=True) if params is not None else {}
    return {"op": "request", "server": server, "method": request.method, "params": payload}


def _checked(answer: dict[str, Any]) -> dict[str, Any]:
    error = answer.get("error")
    if error is not None:
        code = answer.get("code")
        raise BackendError(str(error), code if isinstance(code, int) else None)
    return answer
