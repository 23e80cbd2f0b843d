"""Socket Mode: Slack pushes events over a WebSocket that the app opens, so no public URL is needed.

``apps.connections.open`` (with the app-level token) gives a one-time URL; Slack greets with
``hello``, sends each event in an envelope, and resends an envelope that is not acknowledged. The
acknowledgement (``{"envelope_id": ...}``) goes back only after the handler returns, that is after the
message is on disk: a crash before it, or a connection that drops, makes Slack deliver it again,
and the dedupe key stores it once. A ``disconnect`` frame (Slack refreshes connections every few
hours) or a dropped socket opens a new connection.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from channel_servers.slack.api import NetworkError, RateLimited, Sleep, WebApi

logger = logging.getLogger("nexo.slack")

Handler = Callable[[str, dict[str, Any]], Awaitable[bool]]
"""``(envelope type, payload)``; ``True`` acknowledges the envelope, ``False`` lets Slack resend it."""
_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)


async def run(api: WebApi, app_token: str, handle: Handler, ready: Callable[[], None], sleep: Sleep) -> None:
    """Receive until cancelled, reconnecting after every refresh or drop."""
    failures = 0
    while True:
        try:
            opened = await api.call("apps.connections.open", token=app_token)
            async with connect(str(opened["url"]), max_size=2**23, open_timeout=30) as socket:
                failures = 0
                async for raw in socket:
                    frame: dict[str, Any] = json.loads(raw)
                    kind = frame.get("type")
                    if kind == "hello":
                        ready()
                    elif kind == "disconnect":
                        logger.info("slack: Socket Mode connection refreshed (%s)", frame.get("reason"))
                        break
                    elif "envelope_id" in frame:
                        payload = frame.get("payload")
                        if isinstance(payload, dict) and await handle(str(kind), payload):
                            await socket.send(json.dumps({"envelope_id": frame["envelope_id"]}))
        except (ConnectionClosed, InvalidHandshake, OSError, TimeoutError, NetworkError, RateLimited) as exc:
            failures += 1
            wait = _BACKOFF_S[min(failures, len(_BACKOFF_S)) - 1]
            logger.warning(
                "slack: Socket Mode connection lost (%s), reconnecting in %g s", type(exc).__name__, wait
            )
            await sleep(wait)
