"""The user messages waiting or being answered: unattended work yields to them."""

from __future__ import annotations

import time

import anyio

Marker = tuple[str, str]
"""A message in flight: its channel server and its event's dedupe key."""


class InFlight:
    """The markers of the messages taken and not yet done with, and when the last one arrived."""

    def __init__(self) -> None:
        self._markers: set[Marker] = set()
        self._quiet = anyio.Event()
        self._quiet.set()
        self.last_message_at = time.monotonic()

    def __contains__(self, marker: Marker) -> bool:
        return marker in self._markers

    def __bool__(self) -> bool:
        return bool(self._markers)

    def begin(self, marker: Marker) -> None:
        self._markers.add(marker)
        self.last_message_at = time.monotonic()
        if self._quiet.is_set():
            self._quiet = anyio.Event()

    def end(self, marker: Marker) -> None:
        self._markers.discard(marker)
        if not self._markers:
            self._quiet.set()

    async def wait_quiet(self) -> None:
        """Until no user message is waiting or being answered."""
        while self._markers:
            await self._quiet.wait()

    def idle_for_s(self) -> float:
        """Seconds since the last user message arrived."""
        return time.monotonic() - self.last_message_at
