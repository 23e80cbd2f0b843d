"""The pairing control plane: custom JSON-RPC request methods served through an MCP extension.

The orchestrator asks ``check`` for every inbound message and the operator's CLI approves, denies,
revokes, seeds and lists. None of these is a tool, so no model (ours or another MCP client's) can
see or call them: nothing a sender writes can change who is paired.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from servers.pairing.errors import CodeRefused, InvalidRequest, LockedOut, PendingNotFound
from servers.pairing.store import PairingStore
from shared.protocol.pairing import (
    CODE_ALPHABET,
    CODE_INVALID,
    CODE_LENGTH,
    LOCKED_OUT,
    PAIRING_EXTENSION,
    PENDING_NOT_FOUND,
    ApproveParams,
    ApproveRequest,
    ApproveResult,
    CheckParams,
    CheckRequest,
    CheckResult,
    DenyParams,
    DenyRequest,
    DenyResult,
    ListParams,
    ListRequest,
    ListResult,
    RevokeParams,
    RevokeRequest,
    RevokeResult,
    SeedParams,
    SeedRequest,
    SeedResult,
)

Handler = Callable[[PairingStore, Any], Awaitable[types.Result]]


def _method(request: type[types.Request[Any, Any]]) -> str:
    return str(request.model_fields["method"].default)


async def _check(store: PairingStore, params: CheckParams) -> CheckResult:
    return await store.check(params)


async def _approve(store: PairingStore, params: ApproveParams) -> ApproveResult:
    record, request = await store.approve(
        code=params.code, pending_id=params.pending_id, by=params.by, role=params.role
    )
    return ApproveResult(record=record, request=request)


async def _deny(store: PairingStore, params: DenyParams) -> DenyResult:
    changed, status = await store.deny(params.pending_id, by=params.by)
    return DenyResult(changed=changed, status=status)


async def _revoke(store: PairingStore, params: RevokeParams) -> RevokeResult:
    revoked = await store.revoke(
        channel=params.channel,
        sender=params.sender,
        account=params.account,
        scope=params.scope,
        platform=params.platform,
    )
    return RevokeResult(revoked=revoked)


async def _seed(store: PairingStore, params: SeedParams) -> SeedResult:
    records, changed = await store.seed(
        channel=params.channel,
        account=params.account,
        platform=params.platform,
        senders=params.senders,
        role=params.role,
        scope=params.scope,
        by=params.by,
    )
    return SeedResult(records=records, changed=changed)


async def _list(store: PairingStore, params: ListParams) -> ListResult:
    records, pending, lockout = await store.listing(
        channel=params.channel, include_revoked=params.include_revoked
    )
    return ListResult(records=records, pending=pending, lockout=lockout)


ROUTES: tuple[tuple[type[types.Request[Any, Any]], type[BaseModel], Handler], ...] = (
    (CheckRequest, CheckParams, _check),
    (ApproveRequest, ApproveParams, _approve),
    (DenyRequest, DenyParams, _deny),
    (RevokeRequest, RevokeParams, _revoke),
    (SeedRequest, SeedParams, _seed),
    (ListRequest, ListParams, _list),
)
METHODS: tuple[str, ...] = tuple(_method(request) for request, _, _ in ROUTES)


def as_mcp_error(exc: Exception) -> MCPError | None:
    """The JSON-RPC error for what the store refuses; None for anything else (an internal error)."""
    if isinstance(exc, InvalidRequest):
        return MCPError(types.INVALID_PARAMS, str(exc))
    if isinstance(exc, CodeRefused):
        return MCPError(CODE_INVALID, str(exc))
    if isinstance(exc, LockedOut):
        return MCPError(LOCKED_OUT, str(exc))
    if isinstance(exc, PendingNotFound):
        return MCPError(PENDING_NOT_FOUND, str(exc))
    return None


class PairingExtension(Extension):
    """Serves every ``nexo/pairing/...`` method for a server whose lifespan state is a PairingStore."""

    identifier = PAIRING_EXTENSION

    def settings(self) -> dict[str, Any]:
        return {"methods": list(METHODS), "code_length": CODE_LENGTH, "code_alphabet": CODE_ALPHABET}

    def methods(self) -> Sequence[MethodBinding]:
        return tuple(
            MethodBinding(_method(request), params, _bound(handler)) for request, params, handler in ROUTES
        )


def _bound(handler: Handler) -> Callable[[ServerRequestContext[Any, Any], Any], Awaitable[types.Result]]:
    async def call(ctx: ServerRequestContext[Any, Any], params: Any) -> types.Result:
        try:
            return await handler(ctx.lifespan_context, params)
        except Exception as exc:
            error = as_mcp_error(exc)
            if error is None:
                raise
            raise error from exc

    return call
