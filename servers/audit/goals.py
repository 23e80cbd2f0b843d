"""The goal registry: lifecycle, the concurrency cap with its queue, and the boot sweep. No MCP imports.

Every status change is written together with a ``goal`` ledger entry in one transaction, so the
registry and the ledger never disagree about what happened to a goal.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from typing import Any

from servers.audit.drafts import AGENT_RE, GOAL_ID_RE, GoalBody, internal_draft
from servers.audit.errors import GoalNotFound, InvalidRequest, TransitionRefused
from servers.audit.redaction import redact_text
from servers.audit.store import ChainWriter, Ledger, Writes
from shared.db import Transaction
from shared.protocol.audit.goals import Budget, Goal, Origin
from shared.protocol.audit.terms import TERMINAL_STATUSES, GoalKind, GoalStatus
from shared.protocol.sources import SOURCE_EXAMPLES, is_source

ACTIVE_STATUSES: tuple[GoalStatus, ...] = ("running", "sleeping", "queued", "paused")
TRANSITIONS: dict[str, frozenset[str]] = {
    "queued": frozenset({"running", "paused", "cancelled", "failed", "lost_on_restart"}),
    "running": frozenset({"sleeping", "paused", "done", "failed", "cancelled", "lost_on_restart"}),
    "sleeping": frozenset({"running", "queued", "paused", "done", "failed", "cancelled", "lost_on_restart"}),
    "paused": frozenset({"running", "queued", "cancelled", "failed", "lost_on_restart"}),
    **{status: frozenset() for status in TERMINAL_STATUSES},
}
PROMPT_MAX, PHASE_MAX, TEXT_MAX, OUTCOME_MAX = 16_000, 100, 1000, 2000
"""The whole prompt is kept (up to PROMPT_MAX): a resumable goal restarts from it after a restart."""
COLUMNS = (
    "id, agent, kind, status, origin, prompt, phase, created_at, started_at, finished_at, "
    "last_decision, last_event, budget, outcome, notified"
)


def capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def stored_prompt(prompt: str) -> str:
    return capped(redact_text(prompt.strip()), PROMPT_MAX)


def new_goal_id() -> str:
    return f"g-{uuid.uuid4().hex[:12]}"


def _to_goal(row: Sequence[Any]) -> Goal:
    (id_, agent, kind, status, origin, prompt, phase, created, started, finished) = row[:10]
    last_decision, last_event, budget, outcome, notified = row[10:]
    return Goal(
        id=id_,
        agent=agent,
        kind=kind,
        status=status,
        origin=Origin.model_validate_json(origin),
        prompt=prompt,
        phase=phase,
        created_at=created,
        started_at=started,
        finished_at=finished,
        last_decision=last_decision,
        last_event=last_event,
        budget=Budget.model_validate_json(budget),
        outcome=outcome,
        notified=bool(notified),
    )


def _check_source(source: str, what: str = "source") -> None:
    if not is_source(source):
        raise InvalidRequest(f"{what} {source!r} is not a source name: use e.g. {SOURCE_EXAMPLES}")


def _missing(goal_id: str) -> GoalNotFound:
    return GoalNotFound(f"no goal {goal_id!r}: list the goals with nexo/audit/goals/list")


class GoalRegistry:
    def __init__(
        self,
        ledger: Ledger,
        *,
        max_running: int,
        new_id: Callable[[], str] = new_goal_id,
        writes: Writes | None = None,
    ) -> None:
        """``writes`` runs each creation and change: the group-commit writer's batches when given."""
        self.ledger = ledger
        self.max_running = max_running
        self._new_id = new_id
        self._writes: Writes = writes or ledger.write_alone

    # -- reads ----------------------------------------------------------------------------------

    async def get(self, goal_id: str) -> Goal:
        row = await self.ledger.db.fetchone(f"SELECT {COLUMNS} FROM goals WHERE id = ?", (goal_id,))
        if row is None:
            raise _missing(goal_id)
        return _to_goal(row)

    async def find(
        self,
        *,
        active_only: bool = True,
        kind: GoalKind | None = None,
        agent: str | None = None,
        limit: int = 200,
    ) -> list[Goal]:
        """Matching goals in creation order (the newest ``limit`` of them)."""
        where: list[str] = []
        params: list[Any] = []
        if active_only:
            where.append(f"status IN ({', '.join('?' * len(ACTIVE_STATUSES))})")
            params.extend(ACTIVE_STATUSES)
        for column, value in (("kind", kind), ("agent", agent)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self.ledger.db.fetchall(
            f"SELECT {COLUMNS} FROM goals {clause} ORDER BY rowid DESC LIMIT ?", [*params, limit]
        )
        return [_to_goal(row) for row in reversed(rows)]

    async def running(self) -> int:
        row = await self.ledger.db.fetchone("SELECT count(*) FROM goals WHERE status = 'running'")
        return int(row[0]) if row else 0

    # -- writes ---------------------------------------------------------------------------------

    async def create(
        self,
        *,
        agent: str,
        kind: GoalKind,
        origin: Origin,
        prompt: str,
        phase: str = "",
        goal_id: str | None = None,
        source: str = "orchestrator",
    ) -> tuple[Goal, bool]:
        """Admit a goal: running if a slot is free, else queued. An existing id is returned as is."""
        goal_id = goal_id or self._new_id()
        if not GOAL_ID_RE.match(goal_id):
            raise InvalidRequest(f"goal id {goal_id!r} is invalid: use letters, digits and '_.:-' (up to 64)")
        if not agent or not AGENT_RE.match(agent):
            raise InvalidRequest(f"agent {agent!r} is not an agent id (lower-case letters, digits, _ -)")
        _check_source(source)
        _check_source(origin.source, "origin.source")
        return await self._writes(
            lambda writer: self._create(writer, goal_id, agent, kind, origin, prompt, phase, source)
        )

    async def _create(
        self,
        writer: ChainWriter,
        goal_id: str,
        agent: str,
        kind: GoalKind,
        origin: Origin,
        prompt: str,
        phase: str,
        source: str,
    ) -> tuple[Goal, bool]:
        existing = await self._get(writer.tx, goal_id)
        if existing is not None:
            return existing, False
        now = self.ledger.now()
        status: GoalStatus = "running" if await self._running(writer.tx) < self.max_running else "queued"
        row = await writer.tx.fetchone(
            "INSERT INTO goals(id, agent, kind, status, origin, prompt, phase, created_at, started_at, "
            f"budget, queue_pos) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {COLUMNS}",
            (
                goal_id,
                agent,
                kind,
                status,
                origin.model_dump_json(),
                stored_prompt(prompt),
                capped(phase, PHASE_MAX),
                now,
                now if status == "running" else None,
                Budget().model_dump_json(),
                await self._next_queue_pos(writer.tx) if status == "queued" else None,
            ),
        )
        assert row is not None  # RETURNING gives the row just inserted
        goal = _to_goal(row)
        await self._record(writer, goal, None, "created", source)
        return goal, True

    async def update(
        self,
        goal_id: str,
        *,
        status: GoalStatus | None = None,
        phase: str | None = None,
        last_decision: str | None = None,
        last_event: str | None = None,
        budget: Budget | None = None,
        outcome: str | None = None,
        reason: str = "",
        source: str = "orchestrator",
    ) -> tuple[Goal, list[Goal]]:
        """Change fields and maybe the status; returns the goal and the queued goals it let start.

        Asking for ``running`` goes through admission: with no free slot the goal is queued instead.
        Asking for the status the goal already has changes nothing, so retries are harmless.
        """
        _check_source(source)
        fields = {
            "phase": None if phase is None else capped(redact_text(phase), PHASE_MAX),
            "last_decision": None if last_decision is None else capped(redact_text(last_decision), TEXT_MAX),
            "last_event": None if last_event is None else capped(redact_text(last_event), TEXT_MAX),
            "budget": None if budget is None else budget.model_dump_json(),
            "outcome": None if outcome is None else capped(redact_text(outcome), OUTCOME_MAX),
        }
        changed = {column: value for column, value in fields.items() if value is not None}
        return await self._writes(
            lambda writer: self._update(writer, goal_id, changed, status, reason, source)
        )

    async def _update(
        self,
        writer: ChainWriter,
        goal_id: str,
        changed: dict[str, str],
        status: GoalStatus | None,
        reason: str,
        source: str,
    ) -> tuple[Goal, list[Goal]]:
        if changed:
            assignments = ", ".join(f"{column} = ?" for column in changed)
            row = await writer.tx.fetchone(
                f"UPDATE goals SET {assignments} WHERE id = ? RETURNING {COLUMNS}",
                [*changed.values(), goal_id],
            )
            if row is None:
                raise _missing(goal_id)
            goal = _to_goal(row)
        else:
            goal = await self._require(writer.tx, goal_id)
        if status is None or status == goal.status:
            return goal, []
        if status not in TRANSITIONS[goal.status]:
            allowed = ", ".join(sorted(TRANSITIONS[goal.status])) or "none: it is final"
            raise TransitionRefused(
                f"goal {goal_id!r} is {goal.status}; it cannot become {status!r} (allowed: {allowed})"
            )
        target: GoalStatus = status
        if target == "running" and await self._running(writer.tx) >= self.max_running:
            target = "queued"
        if target != goal.status:
            goal = await self._change(writer, goal, target, reason, source)
        return goal, await self._promote(writer)

    async def boot(self, resumable_kinds: Collection[str]) -> tuple[list[Goal], list[Goal], list[Goal]]:
        """Mark live goals of kinds this orchestrator cannot resume as lost_on_restart.

        Returns (lost goals whose origin was not told yet, resumable live goals, promoted goals).
        """
        async with self.ledger.writing() as writer:
            for goal in await self._active(writer.tx):
                if goal.kind not in resumable_kinds:
                    reason = f"the orchestrator restarted and does not resume {goal.kind} goals"
                    await self._change(writer, goal, "lost_on_restart", reason, "orchestrator")
            promoted = await self._promote(writer)
            rows = await writer.tx.fetchall(
                f"SELECT {COLUMNS} FROM goals WHERE status = 'lost_on_restart' AND notified = 0 "
                "ORDER BY rowid"
            )
            resumable = [goal for goal in await self._active(writer.tx) if goal.kind in resumable_kinds]
        return [_to_goal(row) for row in rows], resumable, promoted

    async def mark_notified(self, goal_ids: Sequence[str]) -> int:
        """Record that the origin of each lost goal was told, so no later boot reports it again."""
        marks = ", ".join("?" * len(goal_ids))
        return await self.ledger.db.execute(
            f"UPDATE goals SET notified = 1 WHERE status = 'lost_on_restart' AND notified = 0 "
            f"AND id IN ({marks})",
            list(goal_ids),
        )

    # -- inside a write transaction ---------------------------------------------------------------

    async def _get(self, tx: Transaction, goal_id: str) -> Goal | None:
        row = await tx.fetchone(f"SELECT {COLUMNS} FROM goals WHERE id = ?", (goal_id,))
        return None if row is None else _to_goal(row)

    async def _require(self, tx: Transaction, goal_id: str) -> Goal:
        goal = await self._get(tx, goal_id)
        if goal is None:
            raise _missing(goal_id)
        return goal

    async def _active(self, tx: Transaction) -> list[Goal]:
        marks = ", ".join("?" * len(ACTIVE_STATUSES))
        rows = await tx.fetchall(
            f"SELECT {COLUMNS} FROM goals WHERE status IN ({marks}) ORDER BY rowid", ACTIVE_STATUSES
        )
        return [_to_goal(row) for row in rows]

    @staticmethod
    async def _running(tx: Transaction) -> int:
        row = await tx.fetchone("SELECT count(*) FROM goals WHERE status = 'running'")
        return int(row[0]) if row else 0

    @staticmethod
    async def _next_queue_pos(tx: Transaction) -> int:
        row = await tx.fetchone("SELECT coalesce(max(queue_pos), 0) + 1 FROM goals")
        return int(row[0]) if row else 1

    async def _change(
        self, writer: ChainWriter, goal: Goal, status: GoalStatus, reason: str, source: str
    ) -> Goal:
        now = self.ledger.now()
        started = goal.started_at or (now if status == "running" else None)
        finished = now if status in TERMINAL_STATUSES else None
        # A phase says what a live goal is doing; a finished goal is doing nothing.
        phase = "" if finished is not None else goal.phase
        queue_pos = await self._next_queue_pos(writer.tx) if status == "queued" else None
        row = await writer.tx.fetchone(
            "UPDATE goals SET status = ?, phase = ?, started_at = ?, finished_at = ?, queue_pos = ? "
            f"WHERE id = ? RETURNING {COLUMNS}",
            (status, phase, started, finished, queue_pos, goal.id),
        )
        if row is None:
            raise _missing(goal.id)
        changed = _to_goal(row)
        await self._record(writer, changed, goal.status, reason, source)
        return changed

    async def _record(
        self, writer: ChainWriter, goal: Goal, previous: GoalStatus | None, reason: str, source: str
    ) -> None:
        body = GoalBody(
            status=goal.status,
            previous=previous,
            goal_kind=goal.kind,
            reason=capped(redact_text(reason), 4000),
        )
        subject = f"goal {goal.id} {previous or 'new'} -> {goal.status}"
        draft = internal_draft(body, source=source, agent=goal.agent, goal_id=goal.id, subject=subject)
        await writer.add([(draft, body)])

    async def _promote(self, writer: ChainWriter) -> list[Goal]:
        """Start the oldest queued goals while running slots are free."""
        promoted: list[Goal] = []
        while True:
            # The oldest queued goal, if a running slot is free: one statement asks both.
            row = await writer.tx.fetchone(
                f"SELECT {COLUMNS} FROM goals WHERE status = 'queued' "
                "AND (SELECT count(*) FROM goals WHERE status = 'running') < ? ORDER BY queue_pos LIMIT 1",
                (self.max_running,),
            )
            if row is None:
                break
            reason = "a running slot became free"
            promoted.append(await self._change(writer, _to_goal(row), "running", reason, "audit"))
        return promoted
