"""The bases of every wire model in ``shared.protocol``: each builds its validator on first use.

A pydantic model builds its core schema, validator and serializer when its class is created unless
its config says ``defer_build``. Every process imports whole contracts (the orchestrator all of
them, each server its own and the events one) and uses a handful of their models; built at
import they cost about 0.5-2 ms of start-up each and their validators' memory in every process,
used or not. Deferred, a class costs its field list; pydantic builds it by itself the first time
it validates, dumps or gives its JSON schema (about as long as building it at import would have
taken, paid once per process by the call that needs it).

The MCP SDK's own bases (``mcp_types``) are not deferred, so each of ours subclasses one with the
one setting changed; a model's own ``model_config`` adds to it. A generic request or notification
parametrised from :class:`WireRequest` or :class:`WireNotification` is deferred too, where one
parametrised from the SDK's class would be built at once.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import mcp_types as types
from pydantic import BaseModel, ConfigDict

DEFERRED = ConfigDict(defer_build=True)

ParamsT = TypeVar("ParamsT", bound=types.RequestParams | dict[str, Any] | None)
NotificationParamsT = TypeVar("NotificationParamsT", bound=types.NotificationParams | dict[str, Any] | None)
MethodT = TypeVar("MethodT", bound=str)


class WireModel(BaseModel):
    """A record carried inside params or results (a memory, a ledger entry, an event)."""

    model_config = DEFERRED


class WireParams(types.RequestParams):
    model_config = DEFERRED


class WireResult(types.Result):
    model_config = DEFERRED


class WireNotificationParams(types.NotificationParams):
    model_config = DEFERRED


class WireRequest(types.Request[ParamsT, MethodT], Generic[ParamsT, MethodT]):
    model_config = DEFERRED


class WireNotification(
    types.Notification[NotificationParamsT, MethodT], Generic[NotificationParamsT, MethodT]
):
    model_config = DEFERRED
