"""The "typing..." indicator while the agent works on a chat's message.

A platform starts it when a message arrives (``channel.typing_started(chat_id)``); the kit calls the
platform's ``show(chat_id)`` at once and every ``interval_s`` (Telegram's indicator fades after ~5 s)
until a message goes out to that chat through the outbox, or ``max_s`` passes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskGroup

logger = logging.getLogger("nexo.channel")

Show = Callable[[str], Awaitable[None]]
"""Show the typing indicator in a chat once (the platform hides it by itself after a while)."""


@dataclass
class _Run:
    deadline: float
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)


class Typing:
    def __init__(
        self,
        show: Show,
        *,
        interval_s: float = 4.0,
        max_s: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval_s < 0 or max_s <= 0:
            raise ValueError(f"typing needs interval_s >= 0 and max_s > 0, not {interval_s!r} and {max_s!r}")
        self._show = show
        self._interval = interval_s
        self._max = max_s
        self._clock = clock
        self._runs: dict[str, _Run] = {}
        self._group: TaskGroup | None = None

    def bind(self, group: TaskGroup) -> None:
        """The task group the indicators run in (the channel's lifespan)."""
        self._group = group

    def start(self, chat_id: str) -> None:
        """Show typing in ``chat_id`` now and until a reply goes out (again: the ``max_s`` restarts)."""
        deadline = self._clock() + self._max
        if (run := self._runs.get(chat_id)) is not None:
            run.deadline = deadline
            return
        if self._group is None:
            raise RuntimeError("Typing.start() before the channel runs: call it from receive()")
        run = _Run(deadline)
        self._runs[chat_id] = run
        self._group.start_soon(self._run, chat_id, run, name=f"typing:{chat_id}")

    def stop(self, chat_id: str) -> None:
        """A message went out to ``chat_id``: the indicator stops at once."""
        if (run := self._runs.pop(chat_id, None)) is not None:
            run.scope.cancel()

    @property
    def showing(self) -> frozenset[str]:
        """The chats typing is shown in now."""
        return frozenset(self._runs)

    async def until_stopped(self, chat_id: str) -> None:
        """Return once typing is no longer shown in ``chat_id`` (at once when it is not)."""
        if (run := self._runs.get(chat_id)) is not None:
            await run.done.wait()

    async def _run(self, chat_id: str, run: _Run) -> None:
        try:
            with run.scope:
                while self._clock() < run.deadline:
                    try:
                        with anyio.move_on_after(max(self._interval, 1.0)):
                            await self._show(chat_id)
                    except Exception as exc:  # noqa: BLE001 -- an indicator must never stop a reply
                        logger.debug("typing indicator for chat %r failed: %r", chat_id, exc)
                    await anyio.sleep(min(self._interval, max(run.deadline - self._clock(), 0.0)))
        finally:
            if self._runs.get(chat_id) is run:
                del self._runs[chat_id]
            run.done.set()
