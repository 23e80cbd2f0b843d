"""The intake: one pump per bound channel server, one worker per conversation.

It wires the pieces of the inbound path together: ``dispatch`` takes a pulled event in, ``worker``
answers a session's messages in turn (``answer``, ``goal_run``), ``in_flight`` tells unattended work
when a user message is waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import anyio
from anyio.abc import TaskGroup

from orchestrator.config.agents import AgentConfig
from orchestrator.config.nexo import NexoConfig, workspace_root
from orchestrator.goals import AuditSink, GoalTracker
from orchestrator.intake.admission import Admissions
from orchestrator.intake.away import AwayDigest
from orchestrator.intake.channel_notes import with_channel_notes
from orchestrator.intake.claude_approvals import ClaudeApprovals
from orchestrator.intake.dispatch import dispatch
from orchestrator.intake.gate import GateResult
from orchestrator.intake.in_flight import InFlight
from orchestrator.intake.notices import Notices
from orchestrator.intake.outbound import ReplySender, send_patiently
from orchestrator.intake.pump import ChannelPumps
from orchestrator.intake.ratelimit import ChannelRates
from orchestrator.intake.secret_guard import OutboundGuard
from orchestrator.intake.seen import SeenPushes
from orchestrator.intake.session_queues import SessionQueues
from orchestrator.intake.sessions import SessionHistory
from orchestrator.intake.worker import work
from orchestrator.llm import Provider
from orchestrator.loop import GoalResult, ToolRunner
from orchestrator.mesh import Catalog, Mesh, ServerConnection
from orchestrator.metrics import Metrics
from orchestrator.permissions import ApprovalBroker, PolicyEngine, PolicyGate
from orchestrator.permissions.claude_relay import NEXO_PERMISSION, Relay
from orchestrator.tools.channels import channel_tools
from orchestrator.tools.local import LocalTools, local_catalog_tools
from shared.protocol.channel import ChannelParams, PermissionVerdictParams
from shared.protocol.cron import BINDING_META_KEY, MODEL_META_KEY
from shared.protocol.memory.meta import AGENT_META_KEY, PROVENANCE_META_KEY


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
            partial(dispatch, self),
            seen=seen,
            skipped=None if metrics is None else lambda s, why: metrics.pushes_skipped.labels(s, why).inc(),
        )
        self.away = AwayDigest(
            mesh.get(config.audit.server),
            config.operator.channel,
            config.autonomy.return_digest_after_s,
            operator_chat=config.operator.chat_id,
        )
        self.session_queues = SessionQueues(partial(work, self))
        self.in_flight = InFlight()
        self._tg: TaskGroup | None = None
        self._pulling = anyio.CancelScope()
        self.draining = False
        """Set by a shutdown: messages not started yet stay unacknowledged for the next process."""
        self.drain_started = anyio.Event()
        self.handled = 0

    def gate_for(self, channel: str | None) -> PolicyGate:
        """The permission gate of goals started from ``channel`` (its binding policy, if any)."""
        return self.binding_gates.get(channel or "", self.gate)

    async def _notify_operator(self, text: str) -> None:
        await self.notices.tell_operator(f"[notify] {text}", key=f"notify:{time.time_ns()}")

    @property
    def busy(self) -> bool:
        """A user message is waiting or being answered (unattended work yields to it)."""
        return bool(self.in_flight)

    async def wait_quiet(self) -> None:
        """Until no user message is waiting or being answered."""
        await self.in_flight.wait_quiet()

    def idle_for_s(self) -> float:
        """Seconds since the last user message arrived."""
        return self.in_flight.idle_for_s()

    @property
    def task_group(self) -> TaskGroup:
        """The intake's own tasks (the sessions' workers, goal ends beside replies), while it runs."""
        assert self._tg is not None
        return self._tg

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
            self.session_queues.close()

    # -- pulling -----------------------------------------------------------------------------

    async def _pull(self) -> None:
        with self._pulling:
            async with anyio.create_task_group() as pumps:
                for name in self.agent.channels:
                    pumps.start_soon(self.pumps.run, self.mesh[name], name=f"pump:{name}")

    def stop_taking(self) -> None:
        """A shutdown drains: no new message is pulled or started; those in flight finish."""
        self.draining = True
        self.drain_started.set()
        self._pulling.cancel()

    def channel_gate(self, connection: ServerConnection) -> GateResult:
        return self.pumps.gate(connection)

    async def pushed(self, server: str, params: ChannelParams) -> None:
        """A message a Claude Code channel pushed: its only copy, with no id to acknowledge."""
        await self.pumps.pushed(server, params)

    async def claude_verdict(self, server: str, verdict: PermissionVerdictParams) -> None:
        """An approval answer a Claude Code channel pushed (it names no sender)."""
        await self.claude.verdict(server, verdict)

    async def send(
        self, sender: ReplySender, params: ChannelParams, text: str, key: str, *, notice: bool = False
    ) -> None:
        """Send ``text`` to the chat ``params`` came from, retried until it is out (``key`` dedupes)."""
        await send_patiently(sender, params.meta, text, key=key, notice=notice, agent=self.agent.id)
