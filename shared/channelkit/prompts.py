"""Permission prompts as a channel sees them: which are open, and how each one ended."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from shared.protocol.channel import PermissionRequestParams
from shared.protocol.permission_prompts import PromptOutcome


@dataclass(frozen=True, slots=True)
class PromptClosed:
    """The host settled a prompt; what a platform needs to update the message that showed it."""

    request_id: str
    outcome: PromptOutcome | None
    """None when the host did not say (an older orchestrator)."""
    decided_by: str | None
    """Who decided, for display (``telegram:12345 (Ana)``, ``console``); None when not said."""
    params: PermissionRequestParams | None
    """The prompt as it was asked here; None when this channel was never asked or it expired."""


Closed = Callable[[PromptClosed], Awaitable[None]]
"""Called after the kit marks a prompt closed, e.g. to edit its buttons into "Approved by Ana"."""


class OpenPrompts:
    """Prompt ids the host asked about; only these can be answered from the chat, each once per sender.

    An answer does not close the prompt: whether its sender may approve is the host's decision (its
    pairing and approvers), so a contact's refused ``yes abcde`` must leave the prompt answerable by
    the operator. The host takes the first answer that counts; the prompt closes when it expires.
    """

    def __init__(self, ttl_s: float, clock: Callable[[], float]) -> None:
        self._ttl = ttl_s
        self._clock = clock
        self._open: dict[str, tuple[float, PermissionRequestParams]] = {}
        self._settled: set[str] = set()

    def add(self, params: PermissionRequestParams) -> None:
        self._open[params.request_id] = (self._clock() + self._ttl, params)

    def _expire(self) -> None:
        now = self._clock()
        self._open = {key: entry for key, entry in self._open.items() if entry[0] > now}
        self._settled &= set(self._open)

    def open(self) -> list[PermissionRequestParams]:
        """The prompts still waiting for an answer."""
        self._expire()
        return [params for key, (_, params) in self._open.items() if key not in self._settled]

    def close(self, request_id: str) -> bool:
        """Settled by the host: not shown again, but an answer to it still counts as one (too late)."""
        self._expire()
        shown = request_id in self._open and request_id not in self._settled
        if request_id in self._open:
            self._settled.add(request_id)
        return shown

    def is_open(self, request_id: str) -> bool:
        self._expire()
        return request_id in self._open

    def get(self, request_id: str) -> PermissionRequestParams | None:
        """The prompt as asked, open or settled, until it expires."""
        self._expire()
        entry = self._open.get(request_id)
        return None if entry is None else entry[1]
