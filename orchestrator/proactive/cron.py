"""Cron fires from the cron server: pulled as durable events, run once, reported, acknowledged.

A fire's goal id is derived from the fire and its attempt, so a fire handed out again after a crash
is recognised: a goal that finished is reported as it ended and never run twice; one cut short by
the crash is reported failed (a one-shot then retries with backoff, a recurring entry waits for its
next slot). Missed slots are recorded in the ledger as they are reported.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Literal

import anyio

from orchestrator.intake.outbound import notify
from orchestrator.mesh import ServerConnection, ServerUnavailable
from orchestrator.mesh.events import pull_forever, try_ack
from orchestrator.proactive.pollers import refused_pollers
from shared.protocol.audit.bodies import CronFireBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.audit.methods import GoalGetParams, GoalGetRequest, GoalGetResult
from shared.protocol.cron import (
    FIRE_EVENT,
    MISSED_EVENT,
    FireOutcomeParams,
    FireOutcomeRequest,
    FireOutcomeResult,
    FirePayload,
    MissedPayload,
    PollerSpec,
    SyncPollersParams,
    SyncPollersRequest,
    SyncPollersResult,
)
from shared.protocol.events import (
    Event,
)
from shared.protocol.sources import cron_source

if TYPE_CHECKING:
    from orchestrator.intake import Intake
    from orchestrator.proactive.runtime import Autonomy

logger = logging.getLogger("nexo.cron")

REQUEST_TIMEOUT_S = 30.0
Outcome = Literal["done", "failed", "skipped"]
TERMINAL = frozenset({"done", "failed", "cancelled", "lost_on_restart"})
MISSED_LISTED = 5


class ShuttingDown(Exception):
    """A fire handed out while the orchestrator drains: left unacknowledged for the next process."""


def fire_goal_id(payload: FirePayload) -> str:
    return f"cron-{payload.fire_id}-{payload.attempt}"


def missed_detail(payload: MissedPayload) -> str:
    """One ledger row's account of the slots one entry missed: how many, why, which, what next."""
    count = payload.count
    what = "1 slot" if count == 1 else f"{count} slots"
    detail = f"{what} missed ({payload.reason})"
    if payload.slots:
        listed = ", ".join(slot[:16] for slot in payload.slots[-MISSED_LISTED:])
        detail += ", the newest: " if count > len(payload.slots[-MISSED_LISTED:]) else ": "
        detail += listed
    if payload.parked:
        detail += f". The entry is parked: `nexo cron resume {payload.entry_id}` starts it again"
    return detail


class CronFires:
    def __init__(self, autonomy: Autonomy) -> None:
        self.autonomy = autonomy
        self.handled = 0

    async def run(self) -> None:
        connection = self.autonomy.cron_connection()
        if connection is None:
            return

        async def on_connect() -> bool:
            await self._sync_pollers(connection)
            return True

        async def handle(event: Event) -> None:
            await self._handle(connection, event)

        await pull_forever(
            connection,
            handle,
            limit=20,
            kinds=[FIRE_EVENT, MISSED_EVENT],
            on_connect=on_connect,
            label="cron fires",
        )

    async def _sync_pollers(self, connection: ServerConnection) -> None:
        """The config's pollers become permanent cron entries (created, updated or removed)."""
        for intake in self.autonomy.intakes.values():
            agent = intake.agent
            pollers = [PollerSpec.model_validate(p.model_dump()) for p in agent.pollers]
            try:
                result = await connection.request(
                    SyncPollersRequest(
                        params=SyncPollersParams(binding=agent.id, agent=agent.id, pollers=pollers)
                    ),
                    SyncPollersResult,
                    timeout=REQUEST_TIMEOUT_S,
                )
            except Exception as exc:  # noqa: BLE001 -- the fires of existing entries still run
                logger.error("pollers of %s not synced with the cron server: %s", agent.id, exc)
                continue
            for line in refused_pollers(self.autonomy.config, agent.id, result.refused):
                logger.error("%s; the agent's other pollers run", line)
            if result.created or result.updated or result.deleted:
                logger.info(
                    "pollers of %s: %d created, %d updated, %d removed",
                    agent.id,
                    len(result.created),
                    len(result.updated),
                    len(result.deleted),
                )

    async def _handle(self, connection: ServerConnection, event: Event) -> None:
        try:
            if event.kind == MISSED_EVENT:
                self._missed(MissedPayload.model_validate(event.payload))
            elif event.kind == FIRE_EVENT:
                await self._fire(connection, FirePayload.model_validate(event.payload), event)
            else:
                logger.warning("cron event %d of unknown kind %r acknowledged", event.seq, event.kind)
        except (ServerUnavailable, ShuttingDown) as exc:
            logger.warning("cron event %d not finished (%s); it comes back", event.seq, exc)
            return
        except Exception as exc:
            logger.exception("cron event %d failed", event.seq)
            if event.kind == FIRE_EVENT:
                try:
                    payload = FirePayload.model_validate(event.payload)
                    await self._report(connection, payload, "failed", f"{type(exc).__name__}: {exc}")
                except Exception:  # noqa: BLE001 -- malformed: nothing to report it against
                    logger.error("cron event %d is malformed and is acknowledged", event.seq)
        await self._ack(connection, event)
        self.handled += 1

    def _missed(self, payload: MissedPayload) -> None:
        self._record(
            payload.agent,
            payload.entry_id,
            "-",
            payload.slots[-1] if payload.slots else "-",
            "missed",
            missed_detail(payload),
            slots=max(1, payload.count),
        )

    async def _fire(self, connection: ServerConnection, payload: FirePayload, event: Event) -> None:
        autonomy = self.autonomy
        if autonomy.stopping:
            raise ShuttingDown("nexo is shutting down")
        intake = autonomy.intakes.get(payload.agent) or next(iter(autonomy.intakes.values()), None)
        if intake is None:
            await self._report(connection, payload, "skipped", "no agent runs in this orchestrator")
            return
        if not autonomy.is_enabled():
            logger.info("cron fire %d of %s skipped: autonomy paused", payload.fire_id, payload.entry_id)
            await self._conclude(
                connection,
                payload,
                intake,
                "skipped",
                f"autonomy paused by {autonomy.paused_by}",
                detail="autonomy paused",
            )
            return
        if payload.kind == "reminder":
            await self._remind(connection, payload, intake)
            return
        goal_id = fire_goal_id(payload)
        if event.deliveries > 1:
            previous = await self._previous(goal_id)
            if previous is not None:
                await self._settle(connection, payload, intake, previous)
                return
        source = cron_source(payload.entry_id)
        prompt = f"[scheduled: {payload.schedule} ({payload.timezone}), slot {payload.slot}]\n{payload.text}"
        report = await autonomy.run_fire_turn(
            intake, prompt, goal_id=goal_id, entry_id=payload.entry_id, source=source
        )
        await autonomy.after(intake, report, source=source)
        if report.ended == "answered":
            channel, chat = self._destination(payload)
            await autonomy.say(
                channel,
                chat,
                report.text,
                key=f"cron:{payload.fire_id}:{payload.attempt}",
                agent=intake.agent.id,
            )
        outcome: Outcome
        if report.ended in ("answered", "idle"):
            outcome, error = "done", None
        elif report.ended in ("limit", "budget", "paused", "preempted"):
            outcome, error = "skipped", report.reason
        elif report.ended == "shutdown":
            outcome, error = "failed", "interrupted by a shutdown"
        else:
            outcome, error = "failed", report.reason
        await self._conclude(connection, payload, intake, outcome, error, goal_id=goal_id)
        logger.info("cron fire %d of %s: %s", payload.fire_id, payload.entry_id, outcome)

    def _destination(self, payload: FirePayload) -> tuple[str, str]:
        """The entry's channel and recipient, each defaulting to the operator's."""
        operator = self.autonomy.config.operator
        return payload.channel or operator.channel, payload.recipient or operator.chat_id

    async def _remind(self, connection: ServerConnection, payload: FirePayload, intake: Intake) -> None:
        channel, chat = self._destination(payload)
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_S):
                await notify(
                    self.autonomy.mesh,
                    self.autonomy.config,
                    channel,
                    chat,
                    payload.text,
                    key=f"reminder:{payload.fire_id}:{payload.attempt}",
                    notice=False,
                    sink=self.autonomy.sink,
                    agent=intake.agent.id,
                )
        except Exception as exc:  # noqa: BLE001 -- reported as failed: a one-shot retries with backoff
            await self._conclude(connection, payload, intake, "failed", str(exc))
            return
        await self._conclude(connection, payload, intake, "done", None, detail=f"reminder to {channel}")

    async def _previous(self, goal_id: str) -> str | None:
        """The status of this fire's goal if an earlier delivery got as far as starting it."""
        audit = self.autonomy.mesh.get(self.autonomy.config.audit.server)
        if audit is None:
            return None
        try:
            found = await audit.request(
                GoalGetRequest(params=GoalGetParams(id=goal_id)), GoalGetResult, timeout=30
            )
        except ServerUnavailable:
            raise
        except Exception:  # noqa: BLE001 -- not found: the earlier delivery never started it
            return None
        return found.goal.status if found.goal is not None else None

    async def _settle(
        self, connection: ServerConnection, payload: FirePayload, intake: Intake, status: str
    ) -> None:
        if status == "done":
            await self._conclude(connection, payload, intake, "done", None, detail="redelivered")
        else:
            error = f"interrupted by a restart (goal {fire_goal_id(payload)} was {status})"
            await self._conclude(connection, payload, intake, "failed", error)

    async def _conclude(
        self,
        connection: ServerConnection,
        payload: FirePayload,
        intake: Intake,
        outcome: Outcome,
        error: str | None,
        *,
        detail: str | None = None,
        goal_id: str | None = None,
    ) -> None:
        """A fire's end: a ``cron_fire`` row in the ledger (``detail``, else the error), then the outcome
        reported to the cron server."""
        self._record(
            intake.agent.id,
            payload.entry_id,
            str(payload.fire_id),
            payload.slot,
            outcome,
            detail if detail is not None else error or "",
            goal_id,
        )
        await self._report(connection, payload, outcome, error)

    async def _report(
        self, connection: ServerConnection, payload: FirePayload, outcome: Outcome, error: str | None
    ) -> None:
        try:
            await connection.request(
                FireOutcomeRequest(
                    params=FireOutcomeParams(
                        fire_id=payload.fire_id,
                        outcome=outcome,
                        error=(error or None) and error[:2000],
                        attempt=payload.attempt,
                    )
                ),
                FireOutcomeResult,
                timeout=REQUEST_TIMEOUT_S,
            )
        except ServerUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 -- a stale or unknown fire: nothing more to do with it
            logger.warning("cron fire %d outcome not recorded: %s", payload.fire_id, exc)

    async def _ack(self, connection: ServerConnection, event: Event) -> None:
        # Not acknowledged: handed out again after a restart, where the fire's goal id settles it.
        await try_ack(connection, event)

    def _record(
        self,
        agent: str,
        entry: str,
        fire: str,
        slot: str,
        status: str,
        detail: str,
        goal_id: str | None = None,
        *,
        slots: int = 1,
    ) -> None:
        self.autonomy.sink.record(
            EntryDraft.of(
                CronFireBody(
                    job_id=entry[:200],
                    fire_id=fire[:200],
                    scheduled_for=slot[:200],
                    status=status,
                    detail=detail[:4000],
                    slots=slots,
                ),
                source=cron_source(entry),
                agent=agent,
                goal_id=goal_id,
                subject=f"cron {entry} {status}"[:500],
            )
        )
