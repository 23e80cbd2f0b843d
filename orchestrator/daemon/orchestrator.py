"""The daemon of ``nexo run``: its parts, its start, and its stop on a signal after a drain."""

from __future__ import annotations

import hashlib
import json
import logging
import signal
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus

from orchestrator import gc_pause, start_signals
from orchestrator.child_env import child_env
from orchestrator.config.nexo import NexoConfig
from orchestrator.control import Emit, serve_control
from orchestrator.daemon.agents import agent_intake, build_providers
from orchestrator.daemon.commands import READY_WAIT_S, control_command
from orchestrator.daemon.pushes import PUSHED_NOTIFICATIONS, PushQueue, deliver_pushes
from orchestrator.daemon.status import memory_metrics, refreshed, status_report
from orchestrator.dashboard.ops import start_dashboard
from orchestrator.goals import AuditSink, GoalTracker
from orchestrator.goals.background import Background
from orchestrator.intake import Intake
from orchestrator.intake.seen import SeenPushes, seen_path
from orchestrator.llm import Provider
from orchestrator.lock import InstanceLock
from orchestrator.mesh import Mesh
from orchestrator.mesh.forkserver import ForkServer
from orchestrator.metrics import Metrics, serve_metrics
from orchestrator.proactive.runtime import Autonomy
from orchestrator.sockets import control_path
from orchestrator.state_location import RunningRecord, config_of_label
from orchestrator.storage import StorageWatch
from shared.protocol.audit.bodies import ConfigChangeBody, NoticeBody
from shared.protocol.audit.entries import EntryDraft

if TYPE_CHECKING:
    from orchestrator.dashboard.serve import DashboardServer

logger = logging.getLogger("nexo.daemon")
STARTUP_WAIT_S = 30.0
STARTUP_NOTICE_S = 1.0
SHUTDOWN_FLUSH_S = 2.0


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
        self.metrics = Metrics()
        self.pushes = PushQueue(self.metrics)
        self.mesh = Mesh(
            config.servers,
            config.supervision,
            base_env=child_env(config),
            notifications=PUSHED_NOTIFICATIONS,
            on_notification=self.pushes.on_push,
            fork_server=fork_server if fork_server is not None else config.fork_server,
        )
        self.providers: dict[str, Provider] = {}
        self.intakes: list[Intake] = []
        self.started = time.time()
        self.ready = anyio.Event()
        self.ready_wait_s = READY_WAIT_S
        audit = self.mesh.get(config.audit.server)
        self.metrics_address: tuple[str, int] | None = None
        self.sink = AuditSink(audit)
        self.goals = GoalTracker(audit, metrics=self.metrics)
        self.background = Background(config, self.mesh, self.goals, self.sink, {})
        self.autonomy = Autonomy(config, self.mesh, self.sink)
        self.storage = StorageWatch(config, self.mesh, self.sink)
        self._running: anyio.CancelScope | None = None
        self._starting: anyio.CancelScope | None = None
        self.dashboard: DashboardServer | None = None

    def status(self) -> dict[str, Any]:
        return status_report(self)

    async def command(self, request: dict[str, Any], emit: Emit) -> dict[str, Any]:
        """Operator commands over the control socket: submit and cancel goals, forward reads."""
        return await control_command(self, request, emit)

    def _record_config(self) -> None:
        """One ledger entry per start: which config ran, by digest (secrets are masked before hashing)."""
        dumped = self.config.model_dump(mode="json")
        digest = hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()
        body = ConfigChangeBody(path=self.config_label[:200], change="reload", detail=f"sha256:{digest}")
        self.sink.record(EntryDraft.of(body, source="orchestrator", subject="start"))

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
        pushes, pending_pushes = self.pushes.open()
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
                            partial(serve_metrics, collect=partial(memory_metrics, self.config, self.mesh)),
                            self.metrics,
                            options.host,
                            options.port,
                            partial(refreshed, self),
                        )
                        logger.info("metrics at http://%s:%d/metrics", *self.metrics_address)
                    except OSError as exc:
                        logger.error(
                            "metrics not served on %s:%d (%s); choose a free metrics.port",
                            options.host,
                            options.port,
                            exc.strerror or exc,
                        )
                # Providers first: each makes its HTTPS client's TLS context on a worker thread while
                # this loop completes the servers' handshakes.
                build_providers(self.config, self.providers)
                for provider in self.providers.values():
                    tg.start_soon(provider.warm, name=f"warm:{provider.name}")
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
                    intake = agent_intake(
                        self.config,
                        agent,
                        self.mesh,
                        self.providers[agent.model.provider],
                        goals=self.goals,
                        sink=self.sink,
                        metrics=self.metrics,
                        seen=seen,
                    )
                    self.intakes.append(intake)
                    self.background.intakes[agent.id] = intake
                self._record_config()
                # Before any new goal exists: what the previous process left running is swept first.
                await self.background.boot()
                self.autonomy.interrupted_at_start = len(self.background.interrupted)
                for intake in self.intakes:
                    tg.start_soon(intake.run, name=f"intake:{intake.agent.id}")
                tg.start_soon(
                    deliver_pushes,
                    pending_pushes.clone(),
                    self.intakes,
                    self.mesh,
                    self.metrics,
                    name="pushes",
                )
                await self.autonomy.restore()
                tg.start_soon(self.autonomy.run, self.intakes, name="autonomy")
                self.ready.set()
                gc_pause.resume(freeze=True)  # the start is over (see gc_pause)
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
            # One that came while `nexo run` was still importing and forking was only noted.
            noted = start_signals.requested()
            if noted is not None:
                logger.info("received %s while starting: shutting down", signal.Signals(noted).name)
                await self.shutdown()
                return
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
