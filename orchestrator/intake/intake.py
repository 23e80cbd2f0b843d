"""The intake: one pump per bound channel server, one worker per conversation."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from orchestrator.config.agents import AgentConfig
from orchestrator.config.nexo import NexoConfig, workspace_root
from orchestrator.goals import AuditSink, GoalTracker, LedgerObserver, TrackedGoal
from orchestrator.intake.admission import Admissions, principal_of
from orchestrator.intake.away import AwayDigest
from orchestrator.intake.bookkeeping import ReplyBookkeeping, finish_goal
from orchestrator.intake.channel_notes import with_channel_notes
from orchestrator.intake.chats import scope_of, sender_of
from orchestrator.intake.claude_approvals import ClaudeApprovals
from orchestrator.intake.followups import FollowUps
from orchestrator.intake.gate import GateResult
from orchestrator.intake.notices import PUSHED, Notices
from orchestrator.intake.outbound import ReplySender, reply_sender, send_patiently
from orchestrator.intake.pump import ChannelPumps
from orchestrator.intake.ratelimit import ChannelRates
from orchestrator.intake.secret_guard import OutboundGuard
from orchestrator.intake.seen import SeenPushes
from orchestrator.intake.sessions import SessionHistory
from orchestrator.llm import Provider
from orchestrator.loop import GoalResult, Outcome, ToolRunner, run_goal
from orchestrator.mesh import Catalog, Mesh, ServerConnection, describe_error
from orchestrator.metrics import Metrics
from orchestrator.permissions import ApprovalBroker, PolicyEngine, PolicyGate, decider, origin_line
from orchestrator.permissions.claude_relay import NEXO_PERMISSION, Relay
from orchestrator.permissions.policy import Standing
from orchestrator.proactive.digest import REPLIED
from orchestrator.tools.channels import channel_tools
from orchestrator.tools.local import GoalContext, LocalTools, local_catalog_tools
from shared.protocol.audit.goals import Origin
from shared.protocol.channel import ChannelParams, PermissionVerdictParams, render_channel, session_key
from shared.protocol.cron import BINDING_META_KEY, MODEL_META_KEY
from shared.protocol.events import Event
from shared.protocol.memory.meta import AGENT_META_KEY, PROVENANCE_META_KEY, Provenance

logger = logging.getLogger("nexo.intake")

SESSION_QUEUE = 100
RETRY_INITIAL_S = 1.0
RETRY_MAX_S = 60.0


Inbound = tuple[str, Event, Standing]
"""A queued message: its channel server, the event, and its sender's standing from pairing."""


class LeftForRestart(Exception):
    """A shutdown stopped a message's goal before it had an answer: unacknowledged, the message is
    answered after the next start."""


@dataclass
class _Session:
    key: str
    inbox: MemoryObjectSendStream[Inbound]
    follow_ups: FollowUps
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
        seen: SeenPushes | None = None,
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
        self.model_label = f"{agent.model.provider}/{getattr(provider, 'model', '') or 'unknown'}"
        self.secret_guard = OutboundGuard(config)
        # Who acts (servers key their data by it); each goal adds how far its input is trusted.
        self.runner = ToolRunner(
            mesh,
            {
                AGENT_META_KEY: agent.id,
                PROVENANCE_META_KEY: "owner",
                BINDING_META_KEY: agent.id,
                MODEL_META_KEY: self.model_label,
            },
            screen=self.secret_guard.arguments,
        )
        memory = mesh.get(agent.memory.server)
        self.sessions = SessionHistory(agent.id, agent.history_turns, memory, sink=self.sink)
        self.local = LocalTools(channel_tools(self))
        workspace = workspace_root(config)
        self.gate = PolicyGate(
            broker,
            self._relays,
            PolicyEngine(agent.permissions, workspace=workspace),
            notify=self._notify_operator,
        )
        self.binding_gates = {
            channel: PolicyGate(
                broker, self._relays, PolicyEngine(policy, workspace=workspace), notify=self._notify_operator
            )
            for channel, policy in agent.bindings.items()
        }
        self.notices = Notices(config, mesh, agent.id, self.sink, metrics)
        self.traffic = self.notices.traffic
        self.claude = ClaudeApprovals(config, mesh, agent.channels, broker, self.notices)
        broker.unreached = self.claude.unreached
        self.admissions = Admissions(
            config,
            mesh,
            broker,
            agent=agent.id,
            sink=self.sink,
            relays=self._relays,
            tell_operator=lambda text, key: self.notices.tell_operator(text, key=key),
        )
        if metrics is not None:
            self.admissions.on_refused = lambda server, reason: metrics.refused.labels(server, reason).inc()
        self.rates = ChannelRates(config, metrics)
        self.pumps = ChannelPumps(
            config,
            agent,
            mesh,
            self._dispatch,
            seen=seen,
            skipped=None if metrics is None else lambda s, why: metrics.pushes_skipped.labels(s, why).inc(),
        )
        self.away = AwayDigest(
            mesh.get(config.audit.server),
            config.operator.channel,
            config.autonomy.return_digest_after_s,
            operator_chat=config.operator.chat_id,
        )
        self._sessions: dict[str, _Session] = {}
        self._in_flight: set[tuple[str, str]] = set()
        self._tg: TaskGroup | None = None
        self._pulling = anyio.CancelScope()
        self.draining = False
        """Set by a shutdown: messages not started yet stay unacknowledged for the next process."""
        self._drain_started = anyio.Event()
        self._quiet = anyio.Event()
        self._quiet.set()
        self.last_message_at = time.monotonic()
        self.handled = 0

    def gate_for(self, channel: str | None) -> PolicyGate:
        """The permission gate of goals started from ``channel`` (its binding policy, if any)."""
        return self.binding_gates.get(channel or "", self.gate)

    async def _notify_operator(self, text: str) -> None:
        await self.notices.tell_operator(f"[notify] {text}", key=f"notify:{time.time_ns()}")

    @property
    def busy(self) -> bool:
        """A user message is waiting or being answered (unattended work yields to it)."""
        return bool(self._in_flight)

    async def wait_quiet(self) -> None:
        """Until no user message is waiting or being answered."""
        while self._in_flight:
            await self._quiet.wait()

    def idle_for_s(self) -> float:
        """Seconds since the last user message arrived."""
        return time.monotonic() - self.last_message_at

    def _begin(self, marker: tuple[str, str]) -> None:
        self._in_flight.add(marker)
        self.last_message_at = time.monotonic()
        if self._quiet.is_set():
            self._quiet = anyio.Event()

    def _end(self, marker: tuple[str, str]) -> None:
        self._in_flight.discard(marker)
        if not self._in_flight:
            self._quiet.set()

    def _relays(self) -> list[Relay]:
        nexo: list[Relay] = [
            self.mesh[name] for name in self.agent.channels if self.mesh[name].has_capability(NEXO_PERMISSION)
        ]
        return [*nexo, *self.claude.relays()]

    def system_for(self, connection: ServerConnection) -> str:
        """The system prompt of a conversation on ``connection``: the agent's, then the channel's notes."""
        client = connection.client
        notes = client.instructions if client is not None else None
        return with_channel_notes(self.agent.system_prompt, connection.name, notes)

    def catalog(self) -> Catalog:
        """The model's tools: the servers' (filtered for this agent) and the orchestrator's own."""
        tools = local_catalog_tools(list(self.local.tools.values()))
        base = self.mesh.catalog(allowed=self.agent.allowed_tools, hidden=self.hidden_tools())
        return base.with_tools(tools, self.agent.allowed_tools)

    def hidden_tools(self) -> set[tuple[str, str]]:
        return {(name, self.config.channel(name).outbound_tool_name) for name in self.agent.channels}

    async def run(self) -> None:
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                self.admissions.bind(tg)
                with anyio.move_on_after(20):
                    await self.away.seed()
                tg.start_soon(self._pull, name="pumps")
        finally:
            for session in self._sessions.values():
                session.inbox.close()
            self._sessions.clear()

    # -- pulling -----------------------------------------------------------------------------

    async def _pull(self) -> None:
        with self._pulling:
            async with anyio.create_task_group() as pumps:
                for name in self.agent.channels:
                    pumps.start_soon(self.pumps.run, self.mesh[name], name=f"pump:{name}")

    def stop_taking(self) -> None:
        """A shutdown drains: no new message is pulled or started; those in flight finish."""
        self.draining = True
        self._drain_started.set()
        self._pulling.cancel()

    def channel_gate(self, connection: ServerConnection) -> GateResult:
        return self.pumps.gate(connection)

    async def pushed(self, server: str, params: ChannelParams) -> None:
        """A message a Claude Code channel pushed: its only copy, with no id to acknowledge."""
        await self.pumps.pushed(server, params)

    async def claude_verdict(self, server: str, verdict: PermissionVerdictParams) -> None:
        """An approval answer a Claude Code channel pushed (it names no sender)."""
        await self.claude.verdict(server, verdict)

    async def _dispatch(self, connection: ServerConnection, event: Event) -> None:
        marker = (connection.name, event.dedupe_key)
        if marker in self._in_flight:
            return
        # Malformed or unknown events cannot succeed on a retry: set aside at once, never dropped.
        try:
            if event.kind == "permission_verdict":
                verdict = PermissionVerdictParams.model_validate(event.payload)
                sender = event.payload.get("sender")
                if not await self._may_answer(connection.name, sender):
                    await self.notices.refuse_verdict(
                        connection.name, verdict.request_id, sender, event.payload.get("chat_id")
                    )
                elif not self.broker.resolve(
                    verdict.request_id,
                    verdict.behavior,
                    f"channel:{connection.name}",
                    decider(connection.name, sender, event.payload.get("sender_name")),
                ):
                    await self.notices.late_verdict(
                        connection.name,
                        verdict.request_id,
                        self.broker.settled(verdict.request_id),
                        event.payload.get("chat_id"),
                    )
                await self._ack(connection, event)
                return
            if event.kind != "message":
                raise ValueError(
                    f"unknown event kind {event.kind!r} (expected message or permission_verdict)"
                )
            params = ChannelParams.model_validate(event.payload)
        except ValueError as exc:
            await self.notices.dead_letter(connection, event, describe_error(exc), 1)
            return
        admission = await self.admissions.admit(connection, params, event_key=event.dedupe_key)
        if admission.verdict != "dead_letter":
            group = scope_of(params.meta, infer=True) == "group"
            self.claude.saw_sender(
                connection, sender_of(params.meta), owner=admission.role == "owner", group=group
            )
        if admission.verdict == "dead_letter":
            await self.notices.dead_letter(connection, event, admission.reason, 1)
            return
        if admission.verdict == "handled":
            await self._ack(connection, event)
            return
        refuse = self._refuser(connection, event, params)
        if not await self.rates.admit(connection.name, event.seq, refuse, role=admission.role or "contact"):
            return
        self._begin(marker)
        key = session_key(connection.name, params.meta, self.agent.session_scope)
        session = self._session(key)
        await session.inbox.send((connection.name, event, admission.role or "contact"))

    async def _may_answer(self, server: str, sender: object) -> bool:
        """Approval answers count from the channel's approvers, or by default from its owners."""
        approvers = self.config.channel(server).approvers
        if approvers is not None:
            return sender in approvers
        return await self.admissions.is_owner(server, sender)

    def _refuser(
        self, connection: ServerConnection, event: Event, params: ChannelParams
    ) -> Callable[[float, float], Awaitable[None]]:
        async def refuse(rate: float, wait_s: float) -> None:
            sender = reply_sender(self.config, connection)
            text = (
                f"[rate limited] {connection.name} takes {rate:g} messages a minute; "
                f"this one was not handled. Send it again in {wait_s:.0f} s."
            )
            await self._send(
                sender, params, text, f"ratelimit:{connection.name}:{event.dedupe_key}", notice=True
            )
            await self._ack(connection, event)

        return refuse

    def _session(self, key: str) -> _Session:
        session = self._sessions.get(key)
        if session is None:
            send, receive = anyio.create_memory_object_stream[Inbound](SESSION_QUEUE)
            session = _Session(key=key, inbox=send, follow_ups=FollowUps(key))
            self._sessions[key] = session
            assert self._tg is not None
            self._tg.start_soon(self._worker, session, receive, name=f"session:{key}")
            self._tg.start_soon(session.follow_ups.run, name=f"session-after-reply:{key}")
        return session

    async def _ack(self, connection: ServerConnection, event: Event) -> None:
        await self.pumps.ack(connection, event)

    # -- answering ---------------------------------------------------------------------------

    async def _worker(self, session: _Session, inbox: anyio.abc.ObjectReceiveStream[Inbound]) -> None:
        async with inbox:
            async for server, event, role in inbox:
                handed_over = False
                try:
                    if self.draining and event.seq != PUSHED:
                        continue  # not started: unacknowledged, it is answered after the restart
                    handed_over = await self._handle(session, self.mesh[server], event, role)
                finally:
                    if not handed_over:
                        self._end((server, event.dedupe_key))

    async def _handle(
        self, session: _Session, connection: ServerConnection, event: Event, role: Standing
    ) -> bool:
        """Answer, retrying a failure with backoff; one that keeps failing becomes a dead letter.
        True when the reply went out and its bookkeeping, now the session's follow-ups', ends the
        message's time in flight."""
        options = self.config.channel(connection.name)
        delay = options.retry_backoff_s
        for attempt in range(1, options.max_attempts + 1):
            try:
                await self._answer(session, connection, event, role)
                return True
            except LeftForRestart as stopped:
                logger.info(
                    "message %s:%d is left for the next start: %s", connection.name, event.seq, stopped
                )
                return False
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
            if self.draining and event.seq != PUSHED:
                # No retry while shutting down: unacknowledged, the message is answered after the start.
                logger.info(
                    "message %s:%d is left for the next start: nexo is shutting down",
                    connection.name,
                    event.seq,
                )
                return False
            if attempt < options.max_attempts:
                await anyio.sleep(delay)
                delay *= 2
        await self.notices.dead_letter(connection, event, error, options.max_attempts)
        return False

    async def _answer(
        self, session: _Session, connection: ServerConnection, event: Event, role: Standing
    ) -> None:
        params = ChannelParams.model_validate(event.payload)
        # The role comes from pairing, never from the channel: a sender_role in meta is overwritten,
        # and so is a principal, which only the channel's no_sender setting names.
        standing: dict[str, str] = {"sender_role": role}
        if role == "source":
            options = self.config.channel(connection.name).pairing
            standing["principal"] = principal_of(connection.name, options, params.meta) or "-"
        prompt = render_channel(connection.name, params.content, {**params.meta, **standing})
        sender = reply_sender(self.config, connection)
        source = f"channel:{connection.name}"
        chat_id = params.meta.get("chat_id") or "-"
        if role == "owner":
            digest = await self.away.before_answer()
            if digest is not None:
                await self._send(
                    sender, params, digest, f"digest:{connection.name}:{event.dedupe_key}", notice=True
                )
        goal = await self.goals.start(
            agent=self.agent.id,
            kind="interactive",
            origin=Origin(source=source, session_key=session.key, chat_id=params.meta.get("chat_id")),
            prompt=params.content,
        )
        # After the registry's answer, so the marker's ledger write goes out beside the model call
        # instead of queueing in front of the registry write the turn waits for.
        self.traffic(source, "in", chat_id, "received", params.meta.get("message_id"), len(params.content))
        result: GoalResult | None = None
        try:
            with goal.scope:
                await self.goals.wait_admitted(goal)
                result = await self._run(session, sender, params, prompt, event, goal, source, role)
        except BaseException:
            await finish_goal(self, goal, None)
            raise
        if result is None:
            # Cancelled by the operator (a shutdown propagates instead and leaves the message queued).
            text = f"[cancelled] {goal.cancel_reason or 'cancelled'} (goal {goal.id})"
        else:
            text = result.text if result.outcome is Outcome.DONE and result.text else _explain(result)
        text = self.secret_guard.reply(
            text, server=connection.name, chat_id=params.meta.get("chat_id"), to_owner=role == "owner"
        )
        # The goal's work is done (a shutdown's drain no longer waits for it): its end in the registry
        # and the reply go out together, neither waiting for the other.
        self.goals.forget(goal.id)
        bookkeeping = ReplyBookkeeping(
            self,
            connection,
            event,
            session.key,
            prompt,
            params.content,
            text,
            goal,
            result,
            source,
            done=lambda: self._end((connection.name, event.dedupe_key)),
        )
        await self._finish_and_send(goal, result, sender, params, session, bookkeeping)

    async def _finish_and_send(
        self,
        goal: TrackedGoal,
        result: GoalResult | None,
        sender: ReplySender,
        params: ChannelParams,
        session: _Session,
        bookkeeping: ReplyBookkeeping,
    ) -> None:
        assert self._tg is not None
        # The goal's end in the registry waits for nothing the reply needs, and nothing waits for it:
        # it runs beside the reply in the intake's task group, shielded from the moment it starts,
        # while the reply takes this task's turn first.
        await self._tg.start(finish_goal, self, goal, result)
        key = f"reply:{bookkeeping.connection.name}:{bookkeeping.event.dedupe_key}"
        await self._send(sender, params, bookkeeping.answer, key)
        # The reply is out. No checkpoint from here on, so a shutdown cannot land before its
        # bookkeeping is queued: the next message of the session sees this exchange at once, and the
        # transcript write and the ack follow in order, never lost (followups.py).
        self._replied(session, bookkeeping, params.meta.get("chat_id") or "-")

    def _replied(self, session: _Session, bookkeeping: ReplyBookkeeping, chat_id: str) -> None:
        source, text = bookkeeping.source, bookkeeping.answer
        logger.info(
            "answered %s on %s (%d characters)",
            bookkeeping.goal.id,
            source,
            len(text),
            extra={
                "agent": self.agent.id,
                "goal": bookkeeping.goal.id,
                "server": bookkeeping.connection.name,
            },
        )
        self.traffic(source, "out", chat_id, REPLIED, None, len(text))
        self.sessions.remember(session.key, bookkeeping.prompt, text)
        session.follow_ups.add(bookkeeping)

    async def _run(
        self,
        session: _Session,
        sender: ReplySender,
        params: ChannelParams,
        prompt: str,
        event: Event,
        goal: TrackedGoal,
        source: str,
        role: Standing,
    ) -> GoalResult:
        """Run the goal, waiting out a provider outage (the chat is told once)."""
        delay = RETRY_INITIAL_S
        gate = self.gate_for(sender.connection.name).for_principal(role)
        while True:
            result = await run_goal(
                provider=self.provider,
                system=self.system_for(sender.connection),
                prompt=prompt,
                catalog=gate.visible(self.catalog()),
                runner=self.runner.for_goal(
                    self.local,
                    GoalContext(self.agent.id, goal.id, sender.connection.name, dict(params.meta), role),
                    meta={PROVENANCE_META_KEY: _PROVENANCE[role]},
                ),
                gate=gate.for_origin(origin_line(sender.connection.name, params.meta, role)),
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
            with anyio.move_on_after(delay):
                await self._drain_started.wait()
            if self.draining and event.seq != PUSHED:
                # Waiting out an outage is not work in flight: a shutdown does not wait for the model.
                raise LeftForRestart("nexo shut down while the model was unreachable")
            delay = min(delay * 2, RETRY_MAX_S)

    async def _send(
        self, sender: ReplySender, params: ChannelParams, text: str, key: str, *, notice: bool = False
    ) -> None:
        await send_patiently(sender, params.meta, text, key=key, notice=notice, agent=self.agent.id)


_PROVENANCE: dict[Standing, Provenance] = {
    "owner": "owner",
    "contact": "paired_contact",
    "source": "untrusted",
}
"""How far a goal's input is trusted: a source's payload is a third party's data."""


def _explain(result: GoalResult) -> str:
    if result.outcome is Outcome.DONE:
        return "[nexo] (the model returned an empty answer)"
    return f"[nexo] I stopped without an answer: {result.summary()}"
