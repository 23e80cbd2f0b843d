"""``nexo run``: the mesh, the intake for every agent, the control socket, until a signal."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import BaseModel

from orchestrator.child_env import child_env
from orchestrator.client_actions import ClientActions
from orchestrator.config.nexo import NexoConfig
from orchestrator.control import Emit, serve_control
from orchestrator.dashboard.ops import DASHBOARD_OPS, dashboard_command, start_dashboard
from orchestrator.dlq import channel_connections, dlq
from orchestrator.goals import AuditSink, GoalTracker, TrackedGoal
from orchestrator.goals.background import Background, UnknownAgent
from orchestrator.intake import Intake
from orchestrator.intake.seen import SeenPushes, seen_path
from orchestrator.llm import Provider, build_provider
from orchestrator.lock import InstanceLock
from orchestrator.mesh import Mesh
from orchestrator.mesh.forkserver import ForkServer
from orchestrator.metrics import Metrics, memory_server_metrics, serve_metrics, server_gauges
from orchestrator.permissions import ApprovalBroker
from orchestrator.permissions.answers import withdraw_pairing_prompts
from orchestrator.proactive.runtime import Autonomy
from orchestrator.relay import relay, relay_operator, relay_tool
from orchestrator.sockets import control_path
from orchestrator.state_location import RunningRecord, config_of_label
from orchestrator.storage import StorageWatch
from shared.protocol.audit.bodies import ConfigChangeBody, NoticeBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.channel import (
    NAMESPACES,
    ChannelParams,
    PermissionVerdictParams,
    channel_method,
    permission_verdict_method,
)

if TYPE_CHECKING:
    from orchestrator.dashboard.serve import DashboardServer

logger = logging.getLogger("nexo.daemon")
STARTUP_WAIT_S = 30.0
STARTUP_NOTICE_S = 1.0
SHUTDOWN_FLUSH_S = 2.0
AGENT_OPS = frozenset({"submit", "run", "send", "cron_create"})
"""Control operations that need the agents, which exist only once the servers are up."""
READY_WAIT_S = 4.0
"""How long such an operation waits for a starting daemon: under the CLI's 5 s answer timeout."""
PUSH_QUEUE = 1000
Pushed = ChannelParams | PermissionVerdictParams


GOAL_SOURCES = ("cli", "mcp-server")
"""Who may be named as a goal's origin over the control socket (the ledger's source of its turns)."""


def _goal_source(request: dict[str, Any]) -> str:
    source = request.get("source")
    return source if isinstance(source, str) and source in GOAL_SOURCES else "cli"


def _plain(fields: dict[str, object]) -> dict[str, Any]:
    return {k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v for k, v in fields.items()}


class Orchestrator:
    def __init__(
        self,
        config: NexoConfig,
        *,
        config_label: str,
        fork_server: ForkServer | None = None,
        locked: InstanceLock | None = None,
    ) -> None:
        """``fork_server``: one made before this (``early_fork_server``), whose servers may already
        run, so ``locked`` is then the instance lock the caller took before starting them."""
        self.config = config
        self.config_label = config_label
        self._locked = locked
        self.mesh = Mesh(
            config.servers,
            config.supervision,
            base_env=child_env(config),
            # nexo's own verdicts come through the event log, which names who answered.
            notifications={
                **{channel_method(ns): ChannelParams for ns in NAMESPACES},
                permission_verdict_method("claude"): PermissionVerdictParams,
            },
            on_notification=self._on_push,
            fork_server=fork_server if fork_server is not None else config.fork_server,
        )
        self.providers: dict[str, Provider] = {}
        self.intakes: list[Intake] = []
        self.started = time.time()
        self.ready = anyio.Event()
        self.ready_wait_s = READY_WAIT_S
        audit = self.mesh.get(config.audit.server)
        self.metrics = Metrics()
        self.metrics_address: tuple[str, int] | None = None
        self.sink = AuditSink(audit)
        self.goals = GoalTracker(audit, metrics=self.metrics)
        self.background = Background(config, self.mesh, self.goals, self.sink, {})
        self.autonomy = Autonomy(config, self.mesh, self.sink)
        self.storage = StorageWatch(config, self.mesh, self.sink)
        self._running: anyio.CancelScope | None = None
        self._starting: anyio.CancelScope | None = None
        self.dashboard: DashboardServer | None = None
        self._pushes: MemoryObjectSendStream[tuple[str, Pushed]] | None = None

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "config": self.config_label,
            "state_dir": str(self.config.state_path),
            "uptime_s": round(time.time() - self.started, 1),
            "servers": [s.as_dict() for s in self.mesh.snapshots()],
            "agents": [
                {
                    "id": intake.agent.id,
                    "provider": intake.provider.describe(),
                    "channels": intake.agent.channels,
                    "handled": intake.handled,
                    "pending_approvals": intake.broker.open_requests,
                }
                for intake in self.intakes
            ],
            "warnings": self.warnings(),
            "refused": self.refused(),
            "storage": self.storage.status(),
            "autonomy": self.autonomy.status(),
            "goals": {
                "live": [
                    {"id": g.id, "agent": g.agent, "kind": g.kind, "origin": g.origin.source}
                    for g in self.goals.live.values()
                ],
                "audit": {"sent": self.sink.sent, "queued": self.sink.pending, "dropped": self.sink.dropped},
            },
            "metrics": {
                "url": f"http://{self.metrics_address[0]}:{self.metrics_address[1]}/metrics"
                if self.metrics_address
                else None,
                "counters": self._refreshed().summary(),
            },
        }

    def refused(self) -> list[dict[str, Any]]:
        """What the pairing gate refused since start, per agent, channel, reason and source."""
        return [
            {"agent": intake.agent.id, **row}
            for intake in self.intakes
            for row in intake.admissions.refusals.as_json()
        ]

    def warnings(self) -> list[str]:
        """Shown by `nexo status` and on the operator's chat for as long as they hold."""
        found = []
        for agent in self.config.agents:
            policies = {"": agent.permissions, **{f" on {c}": p for c, p in agent.bindings.items()}}
            for where, policy in policies.items():
                if policy.dangerous_mode:
                    found.append(
                        f"DANGEROUS MODE is on for agent {agent.id}{where}: tool calls run without asking"
                    )
        return found + self.storage.warnings()

    async def _on_push(self, server: str, method: str, params: BaseModel) -> None:
        """Pushed channel messages and Claude Code verdicts, queued from the moment a server
        connects: a Claude Code channel may push before the intakes listen, and its push is the
        message's only copy."""
        if not isinstance(params, ChannelParams | PermissionVerdictParams) or self._pushes is None:
            return
        try:
            self._pushes.send_nowait((server, params))
        except anyio.WouldBlock:
            self.metrics.pushes_skipped.labels(server, "queue_full").inc()
            logger.error(
                "a %s pushed by %s was dropped: %d pushes are already waiting for the intake",
                "message" if isinstance(params, ChannelParams) else "verdict",
                server,
                PUSH_QUEUE,
                extra={"server": server},
            )

    async def _deliver_pushes(self, pushes: MemoryObjectReceiveStream[tuple[str, Pushed]]) -> None:
        """Hand queued pushes to the intakes (which take them only from Claude Code channels)."""
        async with pushes:
            async for server, params in pushes:
                bound = [intake for intake in self.intakes if server in intake.agent.channels]
                # A nexo channel's push is a hint: its message stays in the server's own log.
                if not bound and not self.mesh[server].has_capability("nexo/channel"):
                    self.metrics.pushes_skipped.labels(server, "unbound").inc()
                    logger.warning(
                        "a push from %s was not handled: no agent lists it in its channels",
                        server,
                        extra={"server": server},
                    )
                for intake in bound:
                    if isinstance(params, ChannelParams):
                        await intake.pushed(server, params)
                    else:
                        await intake.claude_verdict(server, params)

    def _record_config(self) -> None:
        """One ledger entry per start: which config ran, by digest (secrets are masked before hashing)."""
        dumped = self.config.model_dump(mode="json")
        digest = hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()
        body = ConfigChangeBody(path=self.config_label[:200], change="reload", detail=f"sha256:{digest}")
        self.sink.record(EntryDraft.of(body, source="orchestrator", subject="start"))

    def _refreshed(self) -> Metrics:
        """Gauges read at scrape time from the live objects."""
        m = self.metrics
        server_gauges(m, {s.name: (s.state == "ready", s.restarts) for s in self.mesh.snapshots()})
        m.audit_queue.set(self.sink.pending)
        m.audit_dropped.set(self.sink.dropped)
        kinds = [g.kind for g in self.goals.live.values()]
        for kind in ("interactive", "bg", "daemon", "daemon_worker"):
            m.live_goals.labels(kind).set(kinds.count(kind))
        for intake in self.intakes:
            m.approvals_pending.labels(intake.agent.id).set(len(intake.broker.open_requests))
        return m

    async def _memory_metrics(self) -> str:
        """What the agents' memory servers export, appended to the orchestrator's /metrics."""
        names = {agent.memory.server for agent in self.config.agents}
        return await memory_server_metrics({n: c for n, c in self.mesh.connections.items() if n in names})

    async def command(self, request: dict[str, Any], emit: Emit) -> dict[str, Any]:
        """Operator commands over the control socket: submit and cancel goals, forward reads."""
        op = request.get("op")
        if op in AGENT_OPS and not self.ready.is_set():
            with anyio.move_on_after(self.ready_wait_s):
                await self.ready.wait()
            if not self.ready.is_set():
                return {
                    "error": "nexo is still starting (its servers are not all up yet); "
                    "try again in a moment, or see `nexo status`"
                }
        if op in ("submit", "run"):
            prompt = request.get("prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                return {"error": f"{op} needs a non-empty prompt"}
            agent = request.get("agent") or self.config.agents[0].id
            try:
                goal = await self.background.submit(str(agent), prompt, source=_goal_source(request))
            except UnknownAgent as exc:
                return {"error": str(exc)}
            if op == "run":
                if request.get("progress") is True:
                    return await self._followed(goal, emit)
                return await self._outcome(goal)
            return {"goal_id": goal.id, "agent": goal.agent}
        if op == "cancel":
            goal_id = str(request.get("goal", ""))
            if self.goals.cancel(
                goal_id, f"cancelled by the operator ({request.get('reason') or 'nexo agent cancel'})"
            ):
                return {"cancelled": goal_id}
            return {"error": f"no live goal {goal_id!r} in this process; see `nexo agent ps`"}
        if op == "dlq":
            return await dlq(channel_connections(self.mesh.connections), request)
        if op == "autonomy":
            action = request.get("action", "status")
            by = str(request.get("by") or "cli")
            if action == "pause":
                self.autonomy.pause(by)
            elif action == "resume":
                self.autonomy.resume(by)
            elif action != "status":
                return {"error": f"unknown autonomy action {action!r}; expected status, pause or resume"}
            return {"autonomy": self.autonomy.status()}
        if op == "channels":
            return {"servers": {c.name: c.describe_live() for c in self.mesh.connections.values()}}
        if op == "refused":
            return {"refused": self.refused()}
        if op == "request":
            answer = await relay(self.mesh, request)
            withdraw_pairing_prompts([intake.broker for intake in self.intakes], request, answer)
            return answer
        if op == "operator":
            answer = await relay_operator(self.mesh, self.config, request)
            withdraw_pairing_prompts([intake.broker for intake in self.intakes], request, answer)
            return answer
        if op == "tool":
            return await relay_tool(self.mesh, request)
        if op in ("send", "cron_create"):
            actions = ClientActions(self.mesh, self.background.intakes, self.sink)
            return await (actions.send(request) if op == "send" else actions.cron_create(request))
        if op in DASHBOARD_OPS:
            return dashboard_command(self, request)
        return {
            "error": f"unknown op {op!r}; expected submit, run, cancel, channels, refused, autonomy, dlq, "
            "request, operator, tool, send, cron_create, dashboard_login, approvals or approve"
        }

    async def _followed(self, goal: TrackedGoal, emit: Emit) -> dict[str, Any]:
        """``run`` with ``progress``: a line when the goal starts and at each noted step, then its
        outcome. Steps noted faster than they are sent are coalesced (the latest wins), and the last
        step is always sent before the outcome."""
        sent: dict[str, Any] = {}

        async def send_latest() -> None:
            latest = {"goal_id": goal.id, **_plain(goal.progress)}
            if latest != sent:
                sent.clear()
                sent.update(latest)
                await emit(latest)

        async with anyio.create_task_group() as tg:

            async def follow() -> None:
                await emit({"goal_id": goal.id, "agent": goal.agent, "phase": "started"})
                while True:
                    progressed = goal.progressed
                    await progressed.wait()
                    await send_latest()

            tg.start_soon(follow)
            outcome = await self._outcome(goal)
            tg.cancel_scope.cancel()
        if goal.progress:
            await send_latest()
        return outcome

    async def _outcome(self, goal: TrackedGoal) -> dict[str, Any]:
        """``nexo agent run`` with the daemon up: answer with the goal's outcome once it ends. The
        control socket cancels this wait when the command goes away (Ctrl-C), and the goal with it."""
        try:
            await goal.finished.wait()
        finally:
            if not goal.finished.is_set():
                self.goals.cancel(goal.id, "cancelled: `nexo agent run` was interrupted")
        if goal.result is None:
            reason = goal.cancel_reason or "it ended without an outcome"
            return {
                "goal_id": goal.id,
                "error": f"goal {goal.id}: {reason}; see `nexo agent attach {goal.id}`",
            }
        return {
            "goal_id": goal.id,
            "agent": goal.agent,
            "summary": goal.result.summary(),
            **goal.result.report(),
        }

    async def run(self, *, on_ready: Callable[[Orchestrator], Awaitable[None]] | None = None) -> None:
        # SIGINT and SIGTERM are ours before anything starts: a Ctrl-C while the servers connect
        # stops the start, where the event loop's own handler would only cancel whatever awaits.
        async with anyio.create_task_group() as watch:
            self._starting = watch.cancel_scope
            await watch.start(self._signals)
            await self._serve(on_ready)
            watch.cancel_scope.cancel()

    async def _serve(self, on_ready: Callable[[Orchestrator], Awaitable[None]] | None) -> None:
        state = self.config.state_path
        pushes, pending_pushes = anyio.create_memory_object_stream[tuple[str, Pushed]](PUSH_QUEUE)
        self._pushes = pushes
        lock: AbstractContextManager[object] = (
            nullcontext() if self._locked is not None else InstanceLock(state, config=self.config_label)
        )
        record = RunningRecord(config_of_label(self.config_label), state)
        with lock, record, pushes, pending_pushes:
            if record.problem is not None:
                logger.info(
                    "no socket record (%s): nexo chat and nexo status read the config", record.problem
                )
            async with SeenPushes.open(seen_path(state)) as seen, self.mesh, anyio.create_task_group() as tg:
                self._running = tg.cancel_scope
                tg.start_soon(self.sink.run, name="audit-sink")
                tg.start_soon(self.goals.run, name="goal-progress")
                self.background.attach(tg)
                await tg.start(serve_control, control_path(state), self.status, self.command)
                if self.config.metrics.port is not None:
                    options = self.config.metrics
                    try:
                        self.metrics_address = await tg.start(
                            partial(serve_metrics, collect=self._memory_metrics),
                            self.metrics,
                            options.host,
                            options.port,
                            self._refreshed,
                        )
                        logger.info("metrics at http://%s:%d/metrics", *self.metrics_address)
                    except OSError as exc:
                        logger.error(
                            "metrics not served on %s:%d (%s); choose a free metrics.port",
                            options.host,
                            options.port,
                            exc.strerror or exc,
                        )
                # Providers first (each builds an HTTPS client): that work overlaps the servers' start.
                self._build_providers()
                self.dashboard = await start_dashboard(tg, self.config, control_path(state))
                missing = await self._wait_for_servers()
                tg.start_soon(self.storage.run, self.config.supervision.storage_check_s, name="storage-watch")
                for name in missing:
                    snap = self.mesh[name].snapshot()
                    logger.warning(
                        "server %s is not ready yet (%s); continuing, it keeps retrying",
                        name,
                        snap.last_error,
                    )
                for agent in self.config.agents:
                    provider = self.providers[agent.model.provider]
                    broker = ApprovalBroker(
                        timeout_s=min(self.config.channel(c).approval_timeout_s for c in agent.channels)
                        if agent.channels
                        else 600.0,
                        sink=self.sink,
                        agent=agent.id,
                    )
                    intake = Intake(
                        self.config,
                        agent,
                        self.mesh,
                        provider,
                        broker,
                        goals=self.goals,
                        sink=self.sink,
                        metrics=self.metrics,
                        seen=seen,
                    )
                    self.intakes.append(intake)
                    self.background.intakes[agent.id] = intake
                    logger.info(
                        "agent %s uses %s and answers %s",
                        agent.id,
                        provider.describe(),
                        agent.channels or "no channels",
                    )
                self._record_config()
                # Before any new goal exists: what the previous process left running is swept first.
                await self.background.boot()
                self.autonomy.interrupted_at_start = len(self.background.interrupted)
                for intake in self.intakes:
                    tg.start_soon(intake.run, name=f"intake:{intake.agent.id}")
                tg.start_soon(self._deliver_pushes, pending_pushes.clone(), name="pushes")
                await self.autonomy.restore()
                tg.start_soon(self.autonomy.run, self.intakes, name="autonomy")
                self.ready.set()
                logger.info(
                    "nexo ready: %d servers, %d agents, state %s",
                    len(self.config.servers),
                    len(self.intakes),
                    state,
                )
                if on_ready is not None:
                    await on_ready(self)
                    tg.cancel_scope.cancel()
            for provider in self.providers.values():
                await provider.aclose()

    def _build_providers(self) -> None:
        for agent in self.config.agents:
            name = agent.model.provider
            if name not in self.providers:
                self.providers[name] = build_provider(name, self.config.llm.providers[name])

    async def _wait_for_servers(self) -> list[str]:
        """Wait up to STARTUP_WAIT_S for every server; after the first second, say which are awaited."""
        missing = await self.mesh.wait_ready(STARTUP_NOTICE_S)
        if not missing:
            return missing
        waiting = [self.mesh[name].snapshot() for name in missing]
        logger.info(
            "waiting up to %gs for %s; each is retried until it answers",
            STARTUP_WAIT_S,
            ", ".join(f"{s.name} at {s.target} ({s.last_error or s.state})" for s in waiting),
        )
        return await self.mesh.wait_ready(STARTUP_WAIT_S - STARTUP_NOTICE_S, missing)

    async def _signals(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()
            async for signum in signals:
                logger.info("received %s: shutting down", signal.Signals(signum).name)
                await self.shutdown()
                return

    async def shutdown(self) -> None:
        """What SIGTERM does: drain, then stop every task; the servers close after them. Still
        starting (no task runs yet): stop the start, nothing has been taken to drain."""
        if self._running is None:
            if self._starting is not None:
                self._starting.cancel()
            return
        await self.drain()
        self._running.cancel()

    async def drain(self) -> None:
        """Before the channels close: take no new work, give the model and tool calls in flight up to
        ``shutdown_drain_s`` to finish (their answers delivered and acknowledged), record and tell
        each chat what could not finish (it is cancelled), then flush the ledger."""
        for intake in self.intakes:
            intake.stop_taking()
        self.autonomy.stop_starting()
        drain_s = self.config.shutdown_drain_s
        with anyio.move_on_after(drain_s):
            for intake in self.intakes:
                await intake.wait_quiet()
            await self.goals.wait_idle()
        left = sorted(self.goals.live)
        if left:
            logger.warning(
                "shutdown: %d goal(s) still running after %g s are cancelled: %s",
                len(left),
                drain_s,
                ", ".join(left),
            )
            message = (
                f"shutdown: {len(left)} goal(s) did not finish within shutdown_drain_s ({drain_s:g} s) "
                f"and were cancelled: {', '.join(left)}"
            )
            self.sink.record(
                EntryDraft.of(
                    NoticeBody(level="warning", message=message[:4000]),
                    source="orchestrator",
                    subject="shutdown cancelled goals",
                )
            )
        await self.background.shutdown_notices()
        if not await self.sink.flush(SHUTDOWN_FLUSH_S):
            logger.warning("audit: %d entries not sent before shutdown", self.sink.pending)
