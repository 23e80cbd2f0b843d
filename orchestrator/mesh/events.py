"""Reading a server's durable event log (``nexo/events/pull`` and ``ack``), the one way every consumer
does it: channel messages for the intake, cron fires for autonomy.

A pull is a long poll from the last sequence number seen. After a server restart (a new client), the
reading starts over from 0, since the server hands out every unacknowledged event again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import anyio
from mcp import MCPError
from pydantic import ValidationError

from orchestrator.mesh.connection import ServerConnection
from orchestrator.mesh.errors import ServerUnavailable, describe_error
from shared.protocol.events import (
    AckParams,
    AckRequest,
    AckResult,
    Event,
    PullParams,
    PullRequest,
    PullResult,
)

logger = logging.getLogger("nexo.events")

PULL_WAIT_MS = 20_000
ACK_TIMEOUT_S = 10.0
ERROR_PAUSE_S = (0.25, 5.0)
"""After a pull the server answered with an error: the first pause, and the longest."""

OnConnect = Callable[[], Awaitable[bool]]
"""Run once per (re)connected server; False: do not pull from this connection (wait for the next)."""


async def _always() -> bool:
    return True


async def pull_forever(
    connection: ServerConnection,
    handle: Callable[[Event], Awaitable[None]],
    *,
    limit: int,
    kinds: Sequence[str] | None = None,
    on_connect: OnConnect = _always,
    label: str,
) -> None:
    """Hand every event of ``connection`` to ``handle``, in order, for as long as the task runs."""
    after, client, pulling, errors = 0, None, False, 0
    while True:
        try:
            current = await connection.wait_ready(timeout=3600)
            if current is not client:
                after, client = 0, current
                pulling = await on_connect()
            if not pulling:
                await connection.wait_closed()
                continue
            batch = await connection.request(
                PullRequest(
                    params=PullParams(
                        after=after,
                        limit=limit,
                        wait_ms=PULL_WAIT_MS,
                        kinds=list(kinds) if kinds is not None else None,
                    )
                ),
                PullResult,
                timeout=PULL_WAIT_MS / 1000,
            )
        except ServerUnavailable as exc:
            logger.info("%s waiting: %s", label, exc)
            continue
        except (MCPError, ValidationError) as exc:
            # A server that errs (one shutting down answers the poll in flight with an error) is that
            # server's trouble: pause, or resume at once when its connection ends, and pull again.
            first, longest = ERROR_PAUSE_S
            pause = min(longest, first * 2**errors)
            errors += 1
            logger.warning(
                "%s: the server answered a pull with an error (%s); pulling again in %gs",
                label,
                describe_error(exc),
                pause,
                extra={"server": connection.name},
            )
            with anyio.move_on_after(pause):
                await connection.wait_closed()
            continue
        errors = 0
        for event in batch.events:
            after = max(after, event.seq)
            await handle(event)


async def try_ack(connection: ServerConnection, event: Event) -> bool:
    """One bounded attempt; False when the server is unavailable (the event stays in its log and is
    handed out again)."""
    try:
        await connection.request(
            AckRequest(params=AckParams(seqs=[event.seq])), AckResult, timeout=ACK_TIMEOUT_S
        )
    except ServerUnavailable as exc:
        logger.warning("%s event %d not acknowledged yet: %s", connection.name, event.seq, exc)
        return False
    return True
