"""The pairing control plane: custom JSON-RPC request methods served through an MCP extension.

The orchestrator asks ``check`` for every inbound message and the operator's CLI approves, denies,
revokes, seeds and lists. None of these is a tool, so no model (ours or another MCP client's) can
see or call them: nothing a sender writes can change who is paired.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mcp_types as types
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError

from servers.pairing.errors import CodeRefused, InvalidRequest, LockedOut, PendingNotFound
from servers.pairing.store import PairingStore
from shared.protocol.control import Route, bind_routes, method_names
from shared.protocol.identities import CODE_ALPHABET, CODE_LENGTH
from shared.protocol.pairing import (
    CODE_INVALID,
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


ROUTES: tuple[Route, ...] = (
    (CheckRequest, CheckParams, _check),
    (ApproveRequest, ApproveParams, _approve),
    (DenyRequest, DenyParams, _deny),
    (RevokeRequest, RevokeParams, _revoke),
    (SeedRequest, SeedParams, _seed),
    (ListRequest, ListParams, _list),
)
METHODS: tuple[str, ...] = method_names(ROUTES)


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
        return bind_routes(ROUTES, as_mcp_error)
