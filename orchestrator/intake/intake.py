"""The intake: one pump per bound channel server, one worker per conversation."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from orchestrator.config import AgentConfig, NexoConfig
from orchestrator.goals import AuditSink, GoalTracker, LedgerObserver, TrackedGoal
from orchestrator.intake.gate import GateResult, evaluate
from orchestrator.intake.outbound import ReplySender, notify
from orchestrator.intake.ratelimit import TokenBucket
from orchestrator.intake.sessions import SessionHistory
from orchestrator.llm import Provider
from orchestrator.loop import GoalResult, Outcome, ToolRunner, run_goal
from orchestrator.loop.extract import extract_memories
from orchestrator.loop.tools import render_result
from orchestrator.mesh import Catalog, Mesh, ServerConnection, ServerUnavailable, describe_error
from orchestrator.metrics import Metrics
from orchestrator.permissions import ApprovalBroker, OperatorGate
from orchestrator.tools.channels import channel_tools
from orchestrator.tools.local import GoalContext, LocalTools, local_catalog_tools
from shared.protocol.audit import ChannelBody, EntryDraft, NoticeBody, Origin
from shared.protocol.channel import ChannelParams, PermissionVerdictParams, render_channel, session_key
from shared.protocol.events import (
    EVENTS_EXTENSION,
    AckParams,
    AckRequest,
    AckResult,
    DeadLetterParams,
    DeadLetterRequest,
    DeadLetterResult,
    Event,
    PullParams,
    PullRequest,
    PullResult,
)
from shared.protocol.memory import AGENT_META_KEY, PROVENANCE_META_KEY

logger = logging.getLogger("nexo.intake")

PULL_WAIT_MS = 20_000
SESSION_QUEUE = 100
RETRY_INITIAL_S = 1.0
RETRY_MAX_S = 60.0
FINISH_TIMEOUT_S = 2.0
PUSHED = -1
"""The sequence number of a pushed message: it came with no durable copy to acknowledge."""


@dataclass
class _Session:
    key: str
    inbox: MemoryObjectSendStream[tuple[str, Event]]
    provider_notice_sent: bool = False


class Intake:
    def __init__(
        self,
        config: NexoConfig,
        agent: AgentConfig,
        mesh: Mesh,
        provider: Provider,
        broker: ApprovalBroker,
        *,
        goals: GoalTracker | None = None,
        sink: AuditSink | None = None,
        metrics: Metrics | None = None,
        on_goal: Callable[[GoalResult], None] | None = None,
    ) -> None:
        self.config = config
        self.agent = agent
        self.mesh = mesh
        self.provider = provider
        self.broker = broker
        self.on_goal = on_goal
        self.goals = goals or GoalTracker(None)
        self.sink = sink or AuditSink(None)
        self.metrics = metrics
        # Channel turns come from the operator's own console for now; pairing will label contacts.
        self.runner = ToolRunner(mesh, {AGENT_META_KEY: agent.id, PROVENANCE_META_KEY: "owner"})
        memory = mesh.get(agent.memory.server)
        self.sessions = SessionHistory(agent.id, agent.history_turns, memory)
        self.local = LocalTools(channel_tools(self))
        self.gate = OperatorGate(broker, self._relays)
        self._sessions: dict[str, _Session] = {}
        self._in_flight: set[tuple[str, str]] = set()
        self._push_only: dict[str, bool] = {}
        self._buckets: dict[str, TokenBucket] = {}
        self._pushes = 0
        self._tg: TaskGroup | None = None
        self.handled = 0

    def _relays(self) -> list[ServerConnection]:
        return [
            self.mesh[name]
            for name in self.agent.channels
            if self.mesh[name].has_capability("nexo/channel/permission")
        ]

    def catalog(self) -> Catalog:
        """The model's tools: the servers' (filtered for this agent) and the orchestrator's own."""
        tools = local_catalog_tools(list(self.local.tools.values()))
        base = self.mesh.catalog(allowed=self.agent.allowed_tools, hidden=self.hidden_tools())
        return base.with_tools(tools, self.agent.allowed_tools)

    def hidden_tools(self) -> set[tuple[str, str]]:
        return {(name, self.config.channel(name).outbound_tool_name) for name in self.agent.channels}

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            for name in self.agent.channels:
                tg.start_soon(self._pump, self.mesh[name], name=f"pump:{name}")

    # -- pulling -----------------------------------------------------------------------------

    def channel_gate(self, connection: ServerConnection) -> GateResult:
        client = connection.client
        return evaluate(
            self.config,
            self.agent,
            connection.name,
            connection.capability_names() if client is not None else None,
            client.server_info.name if client is not None and client.server_info is not None else None,
        )

    def _registered(self, connection: ServerConnection) -> bool:
        """Apply the gate to a (re)connected server; a skip is logged once per connection."""
        result = self.channel_gate(connection)
        if result.verdict != "register":
            logger.warning(
                "channel %s", result.line(), extra={"server": connection.name, "agent": self.agent.id}
            )
        return result.verdict == "register"

    async def _pump(self, connection: ServerConnection) -> None:
        after, client, registered = 0, None, False
        while True:
            try:
                current = await connection.wait_ready(timeout=3600)
                if current is not client:
                    after, client = 0, current  # a restarted server hands out its unacked events again
                    registered = self._registered(connection)
                    self._push_only[connection.name] = registered and not connection.has_capability(
                        EVENTS_EXTENSION
                    )
                if not registered or self._push_only[connection.name]:
                    # Skipped, or a Claude Code channel (no pull): wait for the next connection.
                    await connection.wait_closed()
                    continue
                batch = await connection.request(
                    PullRequest(params=PullParams(after=after, limit=50, wait_ms=PULL_WAIT_MS)),
                    PullResult,
                    timeout=PULL_WAIT_MS / 1000,
                )
            except ServerUnavailable as exc:
                logger.info("pump %s waiting: %s", connection.name, exc)
                continue
            for event in batch.events:
                after = max(after, event.seq)
                await self._dispatch(connection, event)

    async def pushed(self, server: str, params: ChannelParams) -> None:
        """A message a Claude Code channel pushed: its only copy, with no id to acknowledge."""
        if not self._push_only.get(server):
            return  # a nexo channel: the notification is only a hint, the pull delivers the event
        self._pushes += 1
        key = params.meta.get("message_id") or f"{time.time_ns()}-{self._pushes}"
        event = Event(
            seq=PUSHED,
            kind="message",
            dedupe_key=f"push:{key}",
            payload=params.model_dump(mode="json"),
            created_at=time.time(),
        )
        await self._dispatch(self.mesh[server], event)

    async def _dispatch(self, connection: ServerConnection, event: Event) -> None:
        marker = (connection.name, event.dedupe_key)
        if marker in self._in_flight:
            return
        # Malformed or unknown events cannot succeed on a retry: set aside at once, never dropped.
        try:
            if event.kind == "permission_verdict":
                verdict = PermissionVerdictParams.model_validate(event.payload)
                sender = event.payload.get("sender")
                approvers = self.config.channel(connection.name).approvers
                if approvers is not None and sender not in approvers:
                    self._refuse_verdict(connection.name, verdict.request_id, sender)
                else:
                    self.broker.resolve(verdict.request_id, verdict.behavior, f"channel:{connection.name}")
                await self._ack(connection, event)
                return
            if event.kind != "message":
                raise ValueError(
                    f"unknown event kind {event.kind!r} (expected message or permission_verdict)"
                )
            params = ChannelParams.model_validate(event.payload)
        except ValueError as exc:
            await self._dead_letter(connection, event, describe_error(exc), 1)
            return
        if not await self._within_rate(connection, event, params):
            return
        self._in_flight.add(marker)
        key = session_key(connection.name, params.meta, self.agent.session_scope)
        session = self._session(key)
        await session.inbox.send((connection.name, event))

    def _refuse_verdict(self, server: str, request_id: str, sender: object) -> None:
        message = f"approval answer for {request_id} from {sender!r} on {server} refused: not an approver"
        logger.warning(message, extra={"server": server, "agent": self.agent.id})
        self.sink.record(
            EntryDraft.of(
                NoticeBody(level="warning", message=message[:4000]),
                source=f"channel:{server}",
                agent=self.agent.id,
                subject=f"refused answer {request_id}",
            )
        )

    async def _within_rate(self, connection: ServerConnection, event: Event, params: ChannelParams) -> bool:
        """Take a token for the message: wait for one (queue) or refuse it visibly (refuse)."""
        options = self.config.channel(connection.name)
        if options.rate_per_minute is None:
            return True
        bucket = self._buckets.get(connection.name)
        if bucket is None:
            bucket = self._buckets[connection.name] = TokenBucket(options.rate_per_minute, options.burst)
        if bucket.take():
            return True
        if self.metrics is not None:
            self.metrics.rate_limited.labels(connection.name, options.overflow).inc()
        if options.overflow == "refuse":
            logger.warning("rate limit of %s: message %d refused", connection.name, event.seq)
            sender = ReplySender(connection, options.outbound_tool_name)
            text = (
                f"[rate limited] {connection.name} takes {options.rate_per_minute:g} messages a minute; "
                f"this one was not handled. Send it again in {bucket.wait_s():.0f} s."
            )
            await self._send(
                sender, params, text, f"ratelimit:{connection.name}:{event.dedupe_key}", notice=True
            )
            await self._ack(connection, event)
            return False
        wait = bucket.wait_s()
        logger.warning(
            "rate limit of %s reached: message %d waits %.1f s (messages stay queued in the channel)",
            connection.name,
            event.seq,
            wait,
        )
        # A timer, not a poll: the bucket says exactly when the next token is there.
        await anyio.sleep(wait)
        while not bucket.take():  # noqa: ASYNC110 -- refill is time-based; there is no event to wait on
            await anyio.sleep(bucket.wait_s())
        return True

    def _session(self, key: str) -> _Session:
        session = self._sessions.get(key)
        if session is None:
            send, receive = anyio.create_memory_object_stream[tuple[str, Event]](SESSION_QUEUE)
            session = _Session(key=key, inbox=send)
            self._sessions[key] = session
            assert self._tg is not None
            self._tg.start_soon(self._worker, session, receive, name=f"session:{key}")
        return session

    async def _ack(self, connection: ServerConnection, event: Event) -> None:
        if event.seq == PUSHED:
            return
        while True:
            try:
                await connection.request(
                    AckRequest(params=AckParams(seqs=[event.seq])), AckResult, timeout=10
                )
                return
            except ServerUnavailable as exc:
                # The event stays in the server's log and comes back; the outbox key stops a second reply.
                logger.warning("ack of %s:%d deferred: %s", connection.name, event.seq, exc)
                await connection.wait_ready(timeout=3600)

    # -- answering ---------------------------------------------------------------------------

    async def _worker(
        self, session: _Session, inbox: anyio.abc.ObjectReceiveStream[tuple[str, Event]]
    ) -> None:
        async with inbox:
            async for server, event in inbox:
                try:
                    await self._handle(session, self.mesh[server], event)
                finally:
                    self._in_flight.discard((server, event.dedupe_key))

    async def _handle(self, session: _Session, connection: ServerConnection, event: Event) -> None:
        """Answer, retrying a failure with backoff; one that keeps failing becomes a dead letter."""
        options = self.config.channel(connection.name)
        delay = options.retry_backoff_s
        for attempt in range(1, options.max_attempts + 1):
            try:
                await self._answer(session, connection, event)
                return
            except Exception as exc:  # noqa: BLE001 -- any failure of one message must not stop its channel
                error = describe_error(exc)
                logger.warning(
                    "message %s:%d failed (attempt %d of %d): %s",
                    connection.name,
                    event.seq,
                    attempt,
                    options.max_attempts,
                    error,
                    extra={"server": connection.name, "agent": self.agent.id},
                )
            if attempt < options.max_attempts:
                await anyio.sleep(delay)
                delay *= 2
        await self._dead_letter(connection, event, error, options.max_attempts)

    async def _dead_letter(
        self, connection: ServerConnection, event: Event, error: str, attempts: int
    ) -> None:
        reason = f"failed {attempts} times; last error: {error}"
        if event.seq != PUSHED:
            try:
                await connection.request(
                    DeadLetterRequest(params=DeadLetterParams(seq=event.seq, reason=reason)),
                    DeadLetterResult,
                    timeout=10,
                )
            except Exception as exc:  # noqa: BLE001 -- it stays unacknowledged and comes back later
                logger.error("could not set aside %s:%d: %s", connection.name, event.seq, exc)
                return
        where = f"{connection.name}:{event.seq}"
        logger.error(
            "dead letter %s: %s", where, reason, extra={"server": connection.name, "agent": self.agent.id}
        )
        self.sink.record(
            EntryDraft.of(
                NoticeBody(
                    level="error", message=f"dead letter {where}: {reason}"[:4000], limit="max_attempts"
                ),
                source=f"channel:{connection.name}",
                agent=self.agent.id,
                subject=f"dead letter {where}",
            )
        )
        await self._tell_operator(
            f"[dead letter] a message from {connection.name} (event {event.seq}) failed {attempts} times and "
            f"was set aside: {error[:300]}. See `nexo dlq list`; `nexo dlq replay {where}` tries it again.",
            key=f"dlq:{where}:{event.dedupe_key}",
        )

    async def _tell_operator(self, text: str, *, key: str) -> None:
        """A notice to the operator's channel, once per key (the outbox drops a repeat)."""
        operator = self.config.operator
        try:
            with anyio.fail_after(30):
                await notify(self.mesh, self.config, operator.channel, operator.chat_id, text, key=key)
        except Exception as exc:  # noqa: BLE001 -- the log and the ledger still have it
            logger.warning("could not tell the operator (%s): %s", operator.channel, exc)

    async def _answer(self, session: _Session, connection: ServerConnection, event: Event) -> None:
        params = ChannelParams.model_validate(event.payload)
        prompt = render_channel(connection.name, params.content, params.meta)
        sender = ReplySender(connection, self.config.channel(connection.name).outbound_tool_name)
        source = f"channel:{connection.name}"
        chat_id = params.meta.get("chat_id") or "-"
        self.marker(source, "in", chat_id, "received", params.meta.get("message_id"), len(params.content))
        goal = await self.goals.start(
            agent=self.agent.id,
            kind="interactive",
            origin=Origin(source=source, session_key=session.key, chat_id=params.meta.get("chat_id")),
            prompt=params.content,
        )
        result: GoalResult | None = None
        try:
            with goal.scope:
                await self.goals.wait_admitted(goal)
                result = await self._run(session, sender, params, prompt, event, goal, source)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(FINISH_TIMEOUT_S):
                if result is not None:
                    await self.goals.finish(goal, result)
                else:
                    await self.goals.finish(
                        goal, None, status="cancelled", outcome=goal.cancel_reason or "shutdown"
                    )
        if result is None:
            # Cancelled by the operator (a shutdown propagates instead and leaves the message queued).
            text = f"[cancelled] {goal.cancel_reason or 'cancelled'} (goal {goal.id})"
        else:
            text = result.text if result.outcome is Outcome.DONE and result.text else _explain(result)
        await self._send(sender, params, text, f"reply:{connection.name}:{event.dedupe_key}")
        logger.info(
            "answered %s on %s (%d characters)",
            goal.id,
            source,
            len(text),
            extra={"agent": self.agent.id, "goal": goal.id, "server": connection.name},
        )
        self.marker(source, "out", chat_id, "sent", None, len(text))
        turn_id = f"{connection.name}:{event.dedupe_key}"
        await self.sessions.record(session.key, prompt, text, turn_id=turn_id)
        if result is not None and self.agent.memory.extract and result.outcome is Outcome.DONE:
            await self._extract(params.content, text, result)
        await self._ack(connection, event)
        self.handled += 1

    async def _run(
        self,
        session: _Session,
        sender: ReplySender,
        params: ChannelParams,
        prompt: str,
        event: Event,
        goal: TrackedGoal,
        source: str,
    ) -> GoalResult:
        """Run the goal, waiting out a provider outage (the chat is told once)."""
        delay = RETRY_INITIAL_S
        while True:
            result = await run_goal(
                provider=self.provider,
                system=self.agent.system_prompt,
                prompt=prompt,
                catalog=self.catalog(),
                runner=self.runner.for_goal(
                    self.local,
                    GoalContext(self.agent.id, goal.id, sender.connection.name, dict(params.meta)),
                ),
                gate=self.gate,
                budgets=self.agent.budgets,
                history=await self.sessions.history(session.key),
                max_tokens=self.agent.model.max_tokens,
                observer=LedgerObserver(self.sink, self.goals, goal, source, self.metrics),
            )
            if self.on_goal is not None:
                self.on_goal(result)
            if result.outcome is not Outcome.PROVIDER_UNAVAILABLE:
                session.provider_notice_sent = False
                return result
            if not session.provider_notice_sent:
                session.provider_notice_sent = True
                text = (
                    f"[nexo] I could not reach the model: {result.error} "
                    "Your message is queued and will be answered when the provider is reachable."
                )
                await self._send(
                    sender, params, text, f"notice:{sender.connection.name}:{event.dedupe_key}", notice=True
                )
            self.goals.note(goal, phase="waiting for the model", last_event=(result.error or "")[:300])
            await anyio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    def marker(
        self,
        source: str,
        direction: Literal["in", "out"],
        chat_id: str,
        status: str,
        message_id: str | None,
        chars: int,
    ) -> None:
        body = ChannelBody(
            direction=direction, chat_id=chat_id[:200], status=status, message_id=message_id, chars=chars
        )
        self.sink.record(
            EntryDraft.of(body, source=source, agent=self.agent.id, subject=f"{direction} {chat_id}"[:500])
        )
        if self.metrics is not None:
            self.metrics.messages.labels(source.removeprefix("channel:"), direction).inc()

    async def _extract(self, user_text: str, answer: str, result: GoalResult) -> None:
        memory = self.mesh.get(self.agent.memory.server)
        if memory is None:
            return
        meta = {AGENT_META_KEY: self.agent.id, PROVENANCE_META_KEY: "agent"}

        async def remember(content: str, tags: Sequence[str]) -> None:
            outcome = await memory.call_tool(
                "memory_remember", {"content": content, "tags": list(tags), "kind": "fact"}, meta=meta
            )
            if outcome.is_error:
                raise RuntimeError(render_result(outcome))

        extraction = await extract_memories(
            provider=self.provider,
            user_text=user_text,
            answer=answer,
            budgets=self.agent.budgets,
            used=result.usage,
            remember=remember,
            max_items=self.agent.memory.extract_max_items,
        )
        result.usage = result.usage + extraction.usage
        if extraction.skipped:
            logger.info("memory extraction skipped: %s", extraction.skipped)
        elif extraction.stored:
            logger.info("memory extraction stored %d memories", len(extraction.stored))

    async def _send(
        self, sender: ReplySender, params: ChannelParams, text: str, key: str, *, notice: bool = False
    ) -> None:
        delay = RETRY_INITIAL_S
        while True:
            try:
                await sender.send(params.meta, text, idempotency_key=key, notice=notice)
                return
            except ServerUnavailable as exc:
                logger.warning(
                    "reply via %s deferred: %s",
                    sender.connection.name,
                    exc,
                    extra={"server": sender.connection.name, "agent": self.agent.id},
                )
            await anyio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)


def _explain(result: GoalResult) -> str:
    if result.outcome is Outcome.DONE:
        return "[nexo] (the model returned an empty answer)"
    return f"[nexo] I stopped without an answer: {result.summary()}"
