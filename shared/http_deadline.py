"""A deadline on a request's headers, for HTTP listeners that face the internet.

uvicorn hands a request to the app only once its headers are complete, and it never gives up on a
client that sends them one byte at a time (its keep-alive timer stops at the first byte). A listener
built with :func:`header_deadline_protocol` closes a connection whose next request has not finished
its headers within the deadline, from the connection's start or from the end of its last response.
The body's own deadline belongs to the app, which knows what a body may cost.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol


def header_deadline_protocol(timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a ``timeout_s`` deadline on every request's headers."""
    if timeout_s <= 0:
        raise ValueError(f"a header deadline must be > 0 seconds, not {timeout_s!r}")

    class HeaderDeadline(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            # The request being answered now; a new one replaces it once its headers are complete.
            waiting_after = self.cycle
            self._deadline = self.loop.call_later(timeout_s, self._expire, waiting_after)

        def _expire(self, waiting_after: object) -> None:
            self._deadline = None
            if self.cycle is waiting_after and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadline
