"""Background goals (`nexo agent run --bg`), the boot sweep, and the shutdown notices.

A background goal runs in the daemon with the agent's provider, tools and approval relay, and is
recorded in the audit server's registry like any other. At boot, goals the previous process left
running are swept: background goals (bg) start again from their prompt; interactive ones become
``lost_on_restart`` and their chat is told exactly once (the registry keeps who has been told).
Unattended goals (daemon: a heartbeat, tick or cron fire) are never replayed from a stale prompt:
they become ``lost_on_restart`` too, are recorded in the ledger as interrupted and counted, and the
next scheduled cycle decides what to do, under the kill switch, limits and budgets of every
unattended turn. On SIGTERM, every chat with a goal in flight gets a ``[shutdown]`` notice before
the channels close, each bounded so shutdown never hangs.
"""

from __future__ import annotations

import logging

import anyio
from anyio.abc import TaskGroup

from orchestrator.config.nexo import NexoConfig
from orchestrator.goals.observer import LedgerObserver
from orchestrator.goals.sink import AuditSink
from orchestrator.goals.tracker import GoalTracker, TrackedGoal
from orchestrator.intake import Intake
from orchestrator.intake.outbound import notify
from orchestrator.loop import GoalResult, run_goal
from orchestrator.mesh import Mesh
from orchestrator.tools.local import GoalContext
from shared.protocol.audit.bodies import NoticeBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.audit.goals import Goal, Origin
from shared.protocol.audit.methods import (
    GoalBootParams,
    GoalBootRequest,
    GoalBootResult,
    GoalMarkNotifiedParams,
    GoalMarkNotifiedRequest,
    GoalMarkNotifiedResult,
)
from shared.protocol.audit.terms import GoalKind

logger = logging.getLogger("nexo.goals")
RESUMABLE: tuple[GoalKind, ...] = ("bg",)
UNATTENDED: tuple[GoalKind, ...] = ("daemon", "daemon_worker")
NOTICE_TIMEOUT_S = 2.0
ABANDONED = (
    "[abandoned] nexo restarted while working on this (goal {id}); the message will be answered again."
)
SHUTDOWN = "[shutdown] nexo is stopping while working on this (goal {id}); it will answer after the restart."


class UnknownAgent(Exception):
    pass


class Background:
    def __init__(
        self,
        config: NexoConfig,
        mesh: Mesh,
        tracker: GoalTracker,
        sink: AuditSink,
        intakes: dict[str, Intake],
    ) -> None:
        self.config = config
        self.mesh = mesh
        self.tracker = tracker
        self.sink = sink
        self.intakes = intakes
        self._tg: TaskGroup | None = None
        self.interrupted: list[Goal] = []
        """Unattended goals the last boot found cut short (not resumed)."""

    def attach(self, tg: TaskGroup) -> None:
        self._tg = tg

    async def submit(
        self,
        agent: str,
        prompt: str,
        *,
        kind: GoalKind = "bg",
        goal_id: str | None = None,
        source: str = "cli",
    ) -> TrackedGoal:
        intake = self.intakes.get(agent)
        if intake is None:
            known = ", ".join(sorted(self.intakes)) or "(none)"
            raise UnknownAgent(f"no agent {agent!r}; use one of: {known}")
        goal = await self.tracker.start(
            agent=agent, kind=kind, origin=Origin(source=source), prompt=prompt, goal_id=goal_id
        )
        assert self._tg is not None, "attach() the daemon's task group first"
        self._tg.start_soon(self._run, intake, goal, name=f"goal:{goal.id}")
        return goal

    async def _run(self, intake: Intake, goal: TrackedGoal) -> None:
        result: GoalResult | None = None
        try:
            with goal.scope:
                await self.tracker.wait_admitted(goal)
                self.tracker.note(goal, phase="running")
                result = await run_goal(
                    provider=intake.provider,
                    system=intake.agent.system_prompt,
                    prompt=goal.prompt,
                    catalog=intake.catalog(),
                    runner=intake.runner.for_goal(intake.local, GoalContext(intake.agent.id, goal.id)),
                    gate=intake.gate,
                    budgets=intake.agent.budgets,
                    max_tokens=intake.agent.model.max_tokens,
                    observer=LedgerObserver(
                        self.sink, self.tracker, goal, goal.origin.source, self.tracker.metrics
                    ),
                )
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(NOTICE_TIMEOUT_S):
                if result is not None:
                    await self.tracker.finish(goal, result)
                elif goal.cancel_reason is not None:
                    await self.tracker.finish(goal, None, status="cancelled", outcome=goal.cancel_reason)
                else:
                    # Shutdown: the goal stays running in the registry and resumes at the next boot.
                    self.tracker.forget(goal.id)

    async def boot(self) -> GoalBootResult | None:
        """Sweep what the previous process left behind; resume or report each goal once."""
        audit = self.tracker.audit
        if audit is None:
            return None
        try:
            swept = await audit.request(
                GoalBootRequest(params=GoalBootParams(resumable_kinds=list(RESUMABLE))),
                GoalBootResult,
                timeout=10,
            )
        except Exception as exc:  # noqa: BLE001 -- nothing to sweep is better than not starting
            logger.warning("boot sweep skipped: the audit server is unavailable: %s", exc)
            return None
        told: list[str] = []
        for goal in swept.lost:
            if goal.kind in UNATTENDED:
                self._interrupted(goal)
                told.append(goal.id)
            elif await self._tell_origin(goal.origin, ABANDONED.format(id=goal.id), f"abandoned:{goal.id}"):
                told.append(goal.id)
        if told:
            await audit.request(
                GoalMarkNotifiedRequest(params=GoalMarkNotifiedParams(ids=told)),
                GoalMarkNotifiedResult,
                timeout=10,
            )
        for goal in [*swept.resumable, *swept.promoted]:
            await self._resume(goal)
        logger.info(
            "boot sweep: %d lost (%d told), %d interrupted unattended, %d resumed",
            len(swept.lost),
            len(told),
            len(self.interrupted),
            len(swept.resumable),
        )
        return swept

    def _interrupted(self, goal: Goal) -> None:
        """Record (once: the goal is then marked as told) an unattended goal a restart cut short."""
        self.interrupted.append(goal)
        logger.warning(
            "unattended goal %s (%s) was interrupted by a restart; not resumed", goal.id, goal.origin.source
        )
        message = (
            f"unattended goal {goal.id} ({goal.origin.source}) was interrupted by a restart after "
            f"{goal.budget.turns} turns; it is not resumed: the next scheduled cycle decides"
        )
        self.sink.record(
            EntryDraft.of(
                NoticeBody(level="warning", message=message[:4000]),
                source="orchestrator",
                agent=goal.agent,
                goal_id=goal.id,
                subject="goal interrupted",
            )
        )
        if self.tracker.metrics is not None:
            self.tracker.metrics.interrupted.labels(goal.agent, goal.origin.source.split(":", 1)[0]).inc()

    async def _resume(self, goal: Goal) -> None:
        if goal.kind not in RESUMABLE or goal.agent not in self.intakes:
            return
        logger.info("resuming %s goal %s", goal.kind, goal.id)
        await self.submit(goal.agent, goal.prompt, kind=goal.kind, goal_id=goal.id)

    async def _tell_origin(self, origin: Origin, text: str, key: str) -> bool:
        """Send a notice to a goal's chat. True when sent or when there is no chat to tell."""
        if not origin.source.startswith("channel:") or origin.chat_id is None:
            return True
        server = origin.source.removeprefix("channel:")
        if self.mesh.get(server) is None:
            return True  # that channel is no longer configured: nobody to tell
        try:
            with anyio.fail_after(NOTICE_TIMEOUT_S * 5):
                await notify(self.mesh, self.config, server, origin.chat_id, text, key=key, sink=self.sink)
        except Exception as exc:  # noqa: BLE001 -- retried at the next boot (not marked as told)
            logger.warning("could not tell %s about %s: %s", origin.source, key, exc)
            return False
        return True

    async def shutdown_notices(self) -> None:
        """One ``[shutdown]`` notice per chat with an interactive goal in flight, each bounded."""
        for goal in list(self.tracker.live.values()):
            if goal.kind != "interactive":
                continue
            with anyio.move_on_after(NOTICE_TIMEOUT_S):
                await self._tell_origin(goal.origin, SHUTDOWN.format(id=goal.id), f"shutdown:{goal.id}")
