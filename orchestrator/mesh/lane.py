"""The orchestrator's end of the control lane (``shared.protocol.lane``) to a forked built-in server.

A control request (``ServerConnection.request``) to a server that advertises ``nexo/lane`` is
written straight onto the server's stdin with an id of the lane's own, and its answer is taken off
the server's stdout by the transport's reader before the SDK's session sees the line. What the
caller gets is what the SDK's session gives: the result validated as the request's result model,
an ``MCPError`` for a JSON-RPC error, ``CONNECTION_CLOSED`` when the connection ends first. A
request given up (a timeout, a cancelled caller) is cancelled at the server with
``notifications/cancelled``, and an answer that comes after is dropped. A call of one of the tools
the server lists in its ``nexo/lane`` settings (a channel's outbound tool, which every reply calls)
takes the lane the same way, as a ``tools/call`` request.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import MCPError

from shared.protocol.lane import ID_PREFIX, cancel_line, is_lane_id, parsed, request_line

logger = logging.getLogger("nexo.mesh")

R = TypeVar("R", bound=types.Result)
Write = Callable[[bytes], Awaitable[None]]
CANCEL_WRITE_S = 1.0


@dataclass(slots=True)
class _Waiting:
    answered: anyio.Event = field(default_factory=anyio.Event)
    message: dict[str, Any] | None = None


class ClientLane:
    """One connection's lane: attached by the transport, used once the server advertised it."""

    def __init__(self) -> None:
        self._write: Write | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[str, _Waiting] = {}
        self._closed = False
        self.tools: frozenset[str] = frozenset()
        """The tools the server answers on the lane (its ``nexo/lane`` settings)."""

    def attach(self, write: Write) -> None:
        """The transport's way onto the server's stdin, taken in turns with the SDK's writes."""
        self._write = write
        self._closed = False

    @property
    def attached(self) -> bool:
        return self._write is not None and not self._closed

    def deliver(self, line: str) -> bool:
        """True when ``line`` is a lane answer (handed to its caller, or dropped if given up)."""
        message = parsed(line)
        if message is None or "method" in message or not is_lane_id(message.get("id")):
            return False
        waiting = self._waiting.pop(message["id"], None)
        if waiting is not None:
            waiting.message = message
            waiting.answered.set()
        return True

    def close(self) -> None:
        """The connection ended: every caller still waiting gets ``CONNECTION_CLOSED``."""
        self._closed = True
        self._write = None
        waiting, self._waiting = self._waiting, {}
        for each in waiting.values():
            each.answered.set()

    async def request(self, request: types.Request[Any, Any], result_type: type[R]) -> R:
        """Send ``request`` and wait for its answer (the caller bounds the wait)."""
        write = self._write
        if write is None or self._closed:
            raise MCPError(types.CONNECTION_CLOSED, "Connection closed")
        request_id = f"{ID_PREFIX}{next(self._ids)}"
        params = request.params
        params_json = params.model_dump_json(by_alias=True, exclude_none=True) if params is not None else "{}"
        waiting = _Waiting()
        self._waiting[request_id] = waiting
        try:
            try:
                await write(request_line(request_id, request.method, params_json))
            except (OSError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
                raise MCPError(types.CONNECTION_CLOSED, "Connection closed") from exc
            await waiting.answered.wait()
        except BaseException:
            if self._waiting.pop(request_id, None) is not None:
                await self._cancel(request_id)
            raise
        message = waiting.message
        if message is None:
            raise MCPError(types.CONNECTION_CLOSED, "Connection closed")
        error = message.get("error")
        if error is not None:
            data = types.ErrorData.model_validate(error)
            raise MCPError(data.code, data.message, data.data)
        return result_type.model_validate(message.get("result", {}))

    async def _cancel(self, request_id: str) -> None:
        """Tell the server a request was given up (bounded, even from a cancelled caller)."""
        write = self._write
        if write is None:
            return
        with anyio.move_on_after(CANCEL_WRITE_S, shield=True):
            with suppress(OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
                await write(cancel_line(request_id, "the caller stopped waiting"))
