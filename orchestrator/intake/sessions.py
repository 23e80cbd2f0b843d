"""Conversation history for the intake: durable in the memory server when one is configured.

The orchestrator keeps no durable state (ARCHITECTURE.md, principle 2): each session key maps to a
session in the memory server, whose transcript outlives a restart, so a restarted orchestrator
reattaches to the same conversation. Without a memory server, or while it is unreachable, history
lives in this process only; answering never waits on it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from orchestrator.goals.sink import AuditSink
from orchestrator.llm import AssistantMessage, Message, UserMessage
from orchestrator.mesh import ServerConnection
from shared.protocol.audit.bodies import MemoryPromotionBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.memory.memory_md import Promotion
from shared.protocol.memory.sessions import (
    SessionAppendParams,
    SessionAppendRequest,
    SessionAppendResult,
    SessionHistoryParams,
    SessionHistoryRequest,
    SessionHistoryResult,
    SessionResolveParams,
    SessionResolveRequest,
    SessionResolveResult,
    StoredEntry,
    TranscriptEntry,
)

logger = logging.getLogger("nexo.sessions")
CALL_TIMEOUT_S = 10.0


def to_messages(entries: Sequence[StoredEntry]) -> list[Message]:
    """Transcript entries as model context: user and assistant turns, oldest first."""
    messages: list[Message] = []
    for entry in entries:
        if entry.role == "user":
            messages.append(UserMessage(entry.content))
        elif entry.role == "assistant":
            messages.append(AssistantMessage(entry.content))
    return messages


@dataclass
class _Conversation:
    history: list[Message] = field(default_factory=list)
    session_id: int | None = None
    loaded: bool = False
    loading: anyio.Lock = field(default_factory=anyio.Lock)
    """Held while the durable transcript is read: the next message's history and the previous
    exchange's write may both ask for it, and the past must be added once."""


class SessionHistory:
    """History per session key, kept to ``limit`` messages; durable when ``memory`` is given.

    A transcript write can trigger the memory server's consolidation; each memory it promotes to
    MEMORY.md is recorded in the ledger (``sink``) as a ``memory_promotion`` entry.
    """

    def __init__(
        self,
        agent: str,
        limit: int,
        memory: ServerConnection | None = None,
        *,
        sink: AuditSink | None = None,
    ) -> None:
        self.agent = agent
        self.limit = limit
        self.memory = memory
        self.sink = sink
        self._conversations: dict[str, _Conversation] = {}

    def _get(self, key: str) -> _Conversation:
        return self._conversations.setdefault(key, _Conversation())

    async def history(self, key: str) -> list[Message]:
        conversation = self._get(key)
        if not conversation.loaded and self.memory is not None:
            await self._load(key, conversation)
        return list(conversation.history)

    async def _load(self, key: str, conversation: _Conversation) -> None:
        async with conversation.loading:
            if not conversation.loaded:
                await self._read_durable(key, conversation)

    async def _read_durable(self, key: str, conversation: _Conversation) -> None:
        assert self.memory is not None
        try:
            resolved = await self.memory.request(
                SessionResolveRequest(params=SessionResolveParams(agent=self.agent, session_key=key)),
                SessionResolveResult,
                timeout=CALL_TIMEOUT_S,
            )
            conversation.session_id = resolved.session_id
            if not resolved.created and self.limit > 0:
                past = await self.memory.request(
                    SessionHistoryRequest(
                        params=SessionHistoryParams(
                            agent=self.agent, session_id=resolved.session_id, limit=self.limit
                        )
                    ),
                    SessionHistoryResult,
                    timeout=CALL_TIMEOUT_S,
                )
                conversation.history = [*to_messages(past.entries), *conversation.history][-self.limit :]
                logger.info("session %s: reattached with %d messages", key, len(conversation.history))
            conversation.loaded = True
        except Exception as exc:  # noqa: BLE001 -- degrade to this process's memory
            logger.warning("session %s: memory server unavailable, history kept in process: %s", key, exc)

    async def record(self, key: str, user: str, answer: str, *, turn_id: str) -> None:
        """Add one exchange; ``turn_id`` makes a retried write after a crash land once."""
        self.remember(key, user, answer)
        await self.store(key, user, answer, turn_id=turn_id)

    def remember(self, key: str, user: str, answer: str) -> None:
        """Add one exchange to this process's history at once: the session's next message sees it
        even while its durable write (``store``) is still under way."""
        conversation = self._get(key)
        conversation.history.extend([UserMessage(user), AssistantMessage(answer)])
        del conversation.history[: max(0, len(conversation.history) - self.limit)]

    async def store(self, key: str, user: str, answer: str, *, turn_id: str) -> None:
        """Write one exchange, already remembered, to the durable transcript; ``turn_id`` makes a
        retried write after a crash land once."""
        if self.memory is None:
            return
        conversation = self._get(key)
        if not conversation.loaded:
            # The memory server was unreachable when this chat began: try again, so the exchange
            # is stored once it is back instead of living only in this process.
            await self._load(key, conversation)
        if conversation.session_id is None:
            return
        entries = [
            TranscriptEntry(role="user", content=user, turn_id=turn_id, dedupe_key=f"{turn_id}:user"),
            TranscriptEntry(
                role="assistant", content=answer, turn_id=turn_id, dedupe_key=f"{turn_id}:assistant"
            ),
        ]
        try:
            appended = await self.memory.request(
                SessionAppendRequest(
                    params=SessionAppendParams(
                        agent=self.agent, session_id=conversation.session_id, entries=entries
                    )
                ),
                SessionAppendResult,
                timeout=CALL_TIMEOUT_S,
            )
        except Exception as exc:  # noqa: BLE001 -- the reply went out; losing context is the lesser harm
            logger.warning("session %s: transcript not stored: %s", key, exc)
            return
        if appended.promotions and self.sink is not None:
            self._record_promotions(self.sink, self.memory.name, appended.promotions)

    def _record_promotions(self, sink: AuditSink, server: str, promotions: Sequence[Promotion]) -> None:
        source = f"server:{server}"
        for promotion in promotions:
            body = MemoryPromotionBody(
                memory_id=str(promotion.memory_id), tier="memory_md", reason=promotion.reason[:4000]
            )
            sink.record(
                EntryDraft.of(body, source=source, agent=self.agent, subject=f"memory {promotion.memory_id}")
            )
