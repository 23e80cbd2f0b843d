"""Every server that writes says whether its disk is full: the ``nexo/storage`` control method.

A write refused for lack of space raises `shared.db.StorageFull`. This module turns that into what
the caller of the server sees, without each server mapping it: a tool answers ``is_error`` with the
refusal's own sentence (not the SDK's generic crash text), and a control method answers a JSON-RPC
error with code `STORAGE_FULL`. ``nexo/storage/status`` reports each file the server writes, so the
orchestrator can show the condition in ``nexo status`` and ``nexo setup doctor``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError

from shared.db import StorageCondition, StorageFull, collect_refusals
from shared.protocol.deferred import WireModel, WireParams, WireRequest, WireResult

STORAGE_EXTENSION = "nexo/storage"
STATUS_METHOD = "nexo/storage/status"
STORAGE_FULL = -32010
"""JSON-RPC error code: the request needed a write and the disk holding the server's files is full."""

TOOL_ERROR_PREFIX = "Error executing tool {}: "
"""How the SDK introduces every other tool error, kept so a refusal reads like them."""

ConditionsGetter = Callable[[Any], Sequence[StorageCondition]]
"""Maps the server's lifespan state to the storage conditions of the files it writes."""


class StorageStatusParams(WireParams):
    pass


class StoredFile(WireModel):
    path: str
    full: bool
    since: str | None = None
    """When a write first found the disk full (ISO 8601, UTC); absent while writes succeed."""
    free_bytes: int | None = None


class StorageStatusRequest(WireRequest[StorageStatusParams, Literal["nexo/storage/status"]]):
    method: Literal["nexo/storage/status"] = "nexo/storage/status"


class StorageStatusResult(WireResult):
    files: list[StoredFile]

    @property
    def full(self) -> list[StoredFile]:
        return [file for file in self.files if file.full]


def storage_error(exc: BaseException) -> MCPError | None:
    """The JSON-RPC error for a refused write (anywhere in the cause chain), else None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, StorageFull):
            return MCPError(code=STORAGE_FULL, message=str(seen), data={"path": str(seen.path)})
        seen = seen.__cause__
    return None


class _QuietRefusals(logging.Filter):
    """Drops the SDK's per-call crash traceback for a refused write: the storage layer logs the
    condition once when it starts and once when it ends, not once per message."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or storage_error(error) is None


_SDK_TOOL_LOGGER = logging.getLogger("mcp.server.mcpserver.server")


def _quiet_sdk_tool_log() -> None:
    if not any(isinstance(f, _QuietRefusals) for f in _SDK_TOOL_LOGGER.filters):
        _SDK_TOOL_LOGGER.addFilter(_QuietRefusals())


Handler = Callable[[ServerRequestContext[Any, Any], Any], Awaitable[Any]]


def refusing_full_storage(handler: Handler) -> Handler:
    """A control-method handler whose full-disk failure is the `STORAGE_FULL` error, not an internal one."""

    async def call(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        try:
            return await handler(ctx, params)
        except StorageFull as exc:
            error = storage_error(exc)
            assert error is not None
            raise error from exc

    return call


class StorageExtension(Extension):
    """Serves ``nexo/storage/status`` and gives full-disk tool failures their own sentence."""

    identifier = STORAGE_EXTENSION

    def __init__(self, conditions: ConditionsGetter) -> None:
        self._conditions = conditions
        _quiet_sdk_tool_log()

    def methods(self) -> Sequence[MethodBinding]:
        return (MethodBinding(STATUS_METHOD, StorageStatusParams, self._status),)

    async def _status(
        self, ctx: ServerRequestContext[Any, Any], _: StorageStatusParams
    ) -> StorageStatusResult:
        reports = [condition.report() for condition in self._conditions(ctx.lifespan_context)]
        return StorageStatusResult(files=[StoredFile(**report.as_dict()) for report in reports])

    async def intercept_tool_call(
        self, params: types.CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        # The SDK has already turned the tool's exception into a generic is_error result by the time
        # it returns here, so the refusal is taken from what the storage layer recorded during the call.
        with collect_refusals() as refusals:
            result = await call_next(ctx)
        if refusals and isinstance(result, types.CallToolResult) and result.is_error:
            return types.CallToolResult(
                content=[
                    types.TextContent(
                        type="text", text=f"{TOOL_ERROR_PREFIX.format(params.name)}{refusals[-1]}"
                    )
                ],
                is_error=True,
            )
        return result
