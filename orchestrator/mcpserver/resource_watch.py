"""Change notifications for the resources of ``nexo mcp-server`` (handshake era).

A client that subscribes to ``nexo://agents/AGENT/MEMORY.md`` or ``nexo://goals/GOAL`` gets
``notifications/resources/updated`` when that resource changes; a client that lists the resources
(or subscribes to one) gets ``notifications/resources/list_changed`` when goals appear or end, since
each active goal is listed. Nothing pushes a change to this process (MEMORY.md lives in the memory
server, goals in audit), so while anyone is listening the watch reads what is watched again every
:data:`WATCH_INTERVAL_S`, and at once after a call of this server that may have changed it. A
subscription starts from what the resource is when it is made: only later changes are notified.

Connections are told on their standing channel (the stdio pipe, the HTTP GET stream); one that has
gone is forgotten at the first notification that cannot reach it.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.session import ServerSession

from orchestrator.mcpserver.backend import BackendError
from orchestrator.mcpserver.read_tools import goal_snapshot, memory_file
from shared.protocol.audit import methods as audit_methods

if TYPE_CHECKING:
    from orchestrator.config.nexo import NexoConfig
    from orchestrator.mcpserver.backend import Backend

logger = logging.getLogger("nexo.mcpserver")

WATCH_INTERVAL_S = 2.0
MEMORY_PREFIX, MEMORY_SUFFIX = "nexo://agents/", "/MEMORY.md"
GOAL_PREFIX = "nexo://goals/"
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, MCPError)


def goal_uri(goal_id: str) -> str:
    return f"{GOAL_PREFIX}{goal_id}"


class ResourceWatch:
    def __init__(
        self,
        config: NexoConfig,
        backend: Backend,
        static: Callable[[], Awaitable[list[types.Resource]]],
        *,
        interval_s: float = WATCH_INTERVAL_S,
    ) -> None:
        self._config = config
        self._backend = backend
        self._static = static
        """The resources declared on the server (each agent's MEMORY.md)."""
        self._interval_s = interval_s
        self._sessions: dict[int, ServerSession] = {}
        """One session per connection (keyed like ``ClientLogLevels``): the newest request's."""
        self._subscribed: dict[str, set[int]] = {}
        self._listing: set[int] = set()
        self._seen: dict[str, str] = {}
        self._goal_ids: frozenset[str] | None = None
        self._wake = anyio.Event()

    def changed(self) -> None:
        """Look again now: a call of this server may have changed a watched resource."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            with anyio.move_on_after(self._interval_s):
                await self._wake.wait()
            self._wake = anyio.Event()
            if self._listing or self._subscribed:
                await self._check()

    # -- the handlers ------------------------------------------------------------------------

    async def on_list(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        key = self._remember(ctx.session)
        if key is not None:
            self._listing.add(key)
        # Fresh for this answer; the watch keeps its own last look, so other listeners still hear of it.
        current = await self._active_goals()
        if self._goal_ids is None:
            self._goal_ids = current
        goals = sorted(current if current is not None else self._goal_ids or ())
        return types.ListResourcesResult(resources=[*await self._static(), *map(_goal_resource, goals)])

    async def on_subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        self._check_known(uri)
        key = self._remember(ctx.session)
        if key is not None:
            if uri not in self._subscribed:
                self._seen[uri] = await self._fingerprint(uri)
            self._subscribed.setdefault(uri, set()).add(key)
            self._listing.add(key)
        return types.EmptyResult()

    async def on_unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        keys = self._subscribed.get(uri, set())
        key = _connection_key(ctx.session)
        if key is not None:
            keys.discard(key)
        if not keys:
            self._subscribed.pop(uri, None)
            self._seen.pop(uri, None)
        return types.EmptyResult()

    # -- checking ----------------------------------------------------------------------------

    async def _check(self) -> None:
        if self._listing:
            goals = await self._active_goals()
            if self._goal_ids is not None and goals is not None and goals != self._goal_ids:
                for key in list(self._listing):
                    await self._tell(key, None)
            if goals is not None:
                self._goal_ids = goals
        for uri, keys in list(self._subscribed.items()):
            now = await self._fingerprint(uri)
            if now == self._seen.get(uri) or not now:
                continue
            self._seen[uri] = now
            for key in list(keys):
                await self._tell(key, uri)

    async def _tell(self, key: int, uri: str | None) -> None:
        """``updated`` for ``uri``, or ``list_changed`` when None; a gone connection is forgotten."""
        session = self._sessions.get(key)
        try:
            if session is None:
                raise anyio.ClosedResourceError
            if uri is None:
                await session.send_resource_list_changed()
            else:
                await session.send_resource_updated(uri)
        except _GONE:
            self._forget(key)

    async def _fingerprint(self, uri: str) -> str:
        """What the resource is now, as text to compare; empty when it cannot be read this time."""
        try:
            if uri.startswith(GOAL_PREFIX):
                goal = await goal_snapshot(self._config, self._backend, uri.removeprefix(GOAL_PREFIX))
                return json.dumps(goal.model_dump(mode="json"), sort_keys=True)
            agent = uri.removeprefix(MEMORY_PREFIX).removesuffix(MEMORY_SUFFIX)
            memory = await memory_file(self._config, self._backend, agent)
        except ToolError as exc:
            logger.debug("resource %s not read: %s", uri, exc)
            return ""
        return json.dumps([memory.content, [r.rev for r in memory.revisions[:1]]])

    async def _active_goals(self) -> frozenset[str] | None:
        try:
            listed = await self._backend.request(
                self._config.audit.server,
                audit_methods.GoalListRequest(params=audit_methods.GoalListParams(active_only=True)),
                audit_methods.GoalListResult,
            )
        except (BackendError, MCPError, OSError, TimeoutError, ValueError) as exc:
            logger.debug("goals not listed for list_changed: %s: %s", type(exc).__name__, exc)
            return None
        return frozenset(goal.id for goal in listed.goals)

    # -- bookkeeping -------------------------------------------------------------------------

    def _check_known(self, uri: str) -> None:
        memory_uris = {f"{MEMORY_PREFIX}{agent.id}{MEMORY_SUFFIX}" for agent in self._config.agents}
        goal_id = uri.removeprefix(GOAL_PREFIX)
        if uri in memory_uris or (uri.startswith(GOAL_PREFIX) and goal_id and "/" not in goal_id):
            return
        raise MCPError(
            types.INVALID_PARAMS,
            f"no resource {uri!r} to subscribe to; subscribe to one of {', '.join(sorted(memory_uris))} "
            f"or {GOAL_PREFIX}GOAL_ID",
        )

    def _remember(self, session: ServerSession) -> int | None:
        key = _connection_key(session)
        if key is None:
            return None
        if key not in self._sessions:
            connection = session.client_params
            weakref.finalize(connection, self._forget, key)
        self._sessions[key] = session
        return key

    def _forget(self, key: int) -> None:
        self._sessions.pop(key, None)
        self._listing.discard(key)
        for uri, keys in list(self._subscribed.items()):
            keys.discard(key)
            if not keys:
                self._subscribed.pop(uri, None)
                self._seen.pop(uri, None)


def _goal_resource(goal_id: str) -> types.Resource:
    return types.Resource(
        uri=goal_uri(goal_id),
        name=f"goal-{goal_id}",
        title=f"Goal {goal_id}",
        description="A goal that is running, sleeping, queued or paused: its snapshot as JSON.",
        mime_type="application/json",
    )


def _connection_key(session: ServerSession) -> int | None:
    """The connection a request came on: its ``initialize`` parameters, the one object the SDK keeps
    per connection (None on a 2026-07-28 request that named no client)."""
    connection = session.client_params
    return None if connection is None else id(connection)
