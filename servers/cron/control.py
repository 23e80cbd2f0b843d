"""The cron control plane: custom JSON-RPC request methods served through an MCP extension.

These are how the orchestrator and the operator's CLI manage every binding's entries, report how a
fire ended and change the jitter knobs. They are not tools, so no model ever sees them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import mcp_types as types
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError

from servers.cron.errors import EntryNotFound, FireNotFound, InvalidRequest, StateRefused
from servers.cron.state import CronState, fire_model
from shared.protocol.control import Route, bind_routes, method_names
from shared.protocol.cron import (
    CRON_EXTENSION,
    ENTRY_NOT_FOUND,
    EVENT_KINDS,
    FIRE_NOT_FOUND,
    STATE_REFUSED,
    ConfigureParams,
    ConfigureRequest,
    ConfigureResult,
    DropRequest,
    DropResult,
    EntryIdParams,
    EntryResult,
    FireOutcomeParams,
    FireOutcomeRequest,
    FireOutcomeResult,
    FireParams,
    FireRequest,
    FireResult,
    FiresParams,
    FiresRequest,
    FiresResult,
    ListParams,
    ListRequest,
    ListResult,
    PauseRequest,
    ResumeRequest,
    SyncPollersParams,
    SyncPollersRequest,
    SyncPollersResult,
)


async def _list(state: CronState, params: ListParams) -> ListResult:
    return ListResult(entries=await state.entries(params.binding, params.include_finished))


async def _pause(state: CronState, params: EntryIdParams) -> EntryResult:
    return EntryResult(entry=await state.view(await state.pause(params.id)))


async def _resume(state: CronState, params: EntryIdParams) -> EntryResult:
    return EntryResult(entry=await state.view(await state.resume(params.id)))


async def _drop(state: CronState, params: EntryIdParams) -> DropResult:
    return DropResult(id=params.id, dropped=await state.drop(params.id))


async def _fire(state: CronState, params: FireParams) -> FireResult:
    return FireResult(fire=fire_model(await state.fire(params.id)))


async def _fire_result(state: CronState, params: FireOutcomeParams) -> FireOutcomeResult:
    fire, entry = await state.report(
        params.fire_id, params.outcome, error=params.error, attempt=params.attempt
    )
    return FireOutcomeResult(fire=fire_model(fire), entry=await state.view(entry))


async def _fires(state: CronState, params: FiresParams) -> FiresResult:
    since: datetime | None = None
    if params.since is not None:
        try:
            since = datetime.fromisoformat(params.since)
        except ValueError:
            since = None
        if since is None or since.utcoffset() is None:
            raise InvalidRequest(
                f"since {params.since!r} is not an ISO 8601 time with an offset; e.g. '2026-11-21T12:00:00Z'"
            )
    return FiresResult(fires=await state.fires(params.entry_id, since, params.limit))


async def _configure(state: CronState, params: ConfigureParams) -> ConfigureResult:
    jitter, rescheduled = await state.configure(params.jitter)
    return ConfigureResult(jitter=jitter, rescheduled=rescheduled)


async def _sync_pollers(state: CronState, params: SyncPollersParams) -> SyncPollersResult:
    outcome = await state.sync_pollers(params.binding, params.agent, params.pollers, dry_run=params.dry_run)
    return SyncPollersResult(
        created=outcome.created,
        updated=outcome.updated,
        unchanged=outcome.unchanged,
        deleted=outcome.deleted,
        refused=outcome.refused,
    )


ROUTES: tuple[Route, ...] = (
    (ListRequest, ListParams, _list),
    (PauseRequest, EntryIdParams, _pause),
    (ResumeRequest, EntryIdParams, _resume),
    (DropRequest, EntryIdParams, _drop),
    (FireRequest, FireParams, _fire),
    (FireOutcomeRequest, FireOutcomeParams, _fire_result),
    (FiresRequest, FiresParams, _fires),
    (ConfigureRequest, ConfigureParams, _configure),
    (SyncPollersRequest, SyncPollersParams, _sync_pollers),
)
METHODS: tuple[str, ...] = method_names(ROUTES)


def as_mcp_error(exc: Exception) -> MCPError | None:
    """The JSON-RPC error for what the server refuses; None for anything else (an internal error)."""
    if isinstance(exc, InvalidRequest):
        return MCPError(types.INVALID_PARAMS, str(exc))
    if isinstance(exc, EntryNotFound):
        return MCPError(ENTRY_NOT_FOUND, str(exc))
    if isinstance(exc, FireNotFound):
        return MCPError(FIRE_NOT_FOUND, str(exc))
    if isinstance(exc, StateRefused):
        return MCPError(STATE_REFUSED, str(exc))
    return None


def extension_settings() -> dict[str, Any]:
    return {"methods": list(METHODS), "event_kinds": list(EVENT_KINDS)}


class CronExtension(Extension):
    """Serves every ``nexo/cron/...`` method for a server whose lifespan state is a CronState."""

    identifier = CRON_EXTENSION

    def settings(self) -> dict[str, Any]:
        return extension_settings()

    def methods(self) -> Sequence[MethodBinding]:
        return bind_routes(ROUTES, as_mcp_error)
