"""What follows a reply once it is out, off the path of the session's next message.

Ending the goal in the registry, writing the exchange to the durable transcript and acknowledging
the message each cost a round trip to a server that commits to disk. They follow the reply in a
task of the session's own, in order, so a message that arrives meanwhile is answered at once
instead of waiting behind the previous one's bookkeeping. The promises stay those of the reply
path: once a reply is out, its bookkeeping runs even through a shutdown (shielded and bounded), and
a process killed before the acknowledgement answers the message again after the restart, where the
outbox key keeps the reply from being shown twice and the turn id keeps the transcript from holding
it twice.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Protocol

import anyio

logger = logging.getLogger("nexo.intake")


class FollowUp(Protocol):
    """The bookkeeping of one reply that went out."""

    async def settle(self) -> None:
        """The part that must not be lost to a shutdown: bounded, run shielded from cancellation."""
        ...

    async def rest(self) -> None:
        """What may wait or be given up at a shutdown (waiting out a server that is away, extraction)."""
        ...

    def close(self) -> None:
        """Always called last, once: the message is no longer in flight."""
        ...


class FollowUps:
    """One session's follow-ups, oldest first; ``run`` works through them until cancelled."""

    def __init__(self, session: str) -> None:
        self.session = session
        self._queue: deque[FollowUp] = deque()
        self._wake = anyio.Event()

    @property
    def pending(self) -> int:
        return len(self._queue)

    def add(self, follow_up: FollowUp) -> None:
        """Queue without a checkpoint: the reply just went out, and no cancellation may land between
        the two."""
        self._queue.append(follow_up)
        self._wake.set()

    async def run(self) -> None:
        try:
            while True:
                while self._queue:
                    follow_up = self._queue[0]
                    try:
                        with anyio.CancelScope(shield=True):
                            await self._settle(follow_up)
                        self._queue.popleft()
                        await self._rest(follow_up)
                    finally:
                        follow_up.close()
                await self._wake.wait()
                self._wake = anyio.Event()
        finally:
            # Cancelled: what is queued had its reply sent already, so it is settled before leaving.
            with anyio.CancelScope(shield=True):
                while self._queue:
                    follow_up = self._queue.popleft()
                    try:
                        await self._settle(follow_up)
                    finally:
                        follow_up.close()

    async def _settle(self, follow_up: FollowUp) -> None:
        try:
            await follow_up.settle()
        except Exception as exc:  # noqa: BLE001 -- one reply's bookkeeping must not stop the session's
            logger.warning("session %s: bookkeeping after a reply failed: %r", self.session, exc)

    async def _rest(self, follow_up: FollowUp) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()  # a shutdown gives the rest up, even the start
        try:
            await follow_up.rest()
        except Exception as exc:  # noqa: BLE001 -- as above; cancellation still propagates
            logger.warning("session %s: work after a reply failed: %r", self.session, exc)
