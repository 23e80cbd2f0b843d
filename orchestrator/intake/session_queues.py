"""One queue and one worker per session: a session's messages are answered one at a time, in order,
while other sessions go on beside it."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from orchestrator.intake.followups import FollowUps
from orchestrator.permissions.policy import Standing
from shared.protocol.events import Event

SESSION_QUEUE = 100

Inbound = tuple[str, Event, Standing]
"""A queued message: its channel server, the event, and its sender's standing from pairing."""


@dataclass
class Session:
    key: str
    inbox: MemoryObjectSendStream[Inbound]
    follow_ups: FollowUps
    provider_notice_sent: bool = False


Worker = Callable[[Session, ObjectReceiveStream[Inbound]], Coroutine[Any, Any, None]]
"""Answers a session's queued messages in turn until its inbox closes."""


class SessionQueues:
    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._sessions: dict[str, Session] = {}

    def open(self, key: str, tg: TaskGroup) -> Session:
        """The session ``key``, its worker and its follow-ups started in ``tg`` on first use."""
        session = self._sessions.get(key)
        if session is None:
            send, receive = anyio.create_memory_object_stream[Inbound](SESSION_QUEUE)
            session = Session(key=key, inbox=send, follow_ups=FollowUps(key))
            self._sessions[key] = session
            tg.start_soon(self._worker, session, receive, name=f"session:{key}")
            tg.start_soon(session.follow_ups.run, name=f"session-after-reply:{key}")
        return session

    def close(self) -> None:
        """Close every session's inbox and forget the sessions."""
        for session in self._sessions.values():
            session.inbox.close()
        self._sessions.clear()
