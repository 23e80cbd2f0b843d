"""What is pending for an agent when a tick wakes it: the tick's ``Pending:`` lines.

A tick should carry what the agent needs to decide, so an idle tick can answer at once without
loading a single tool: why it asked to be woken, its unfinished goals (background runs, queued or
paused work) from the audit server, and its cron entries that need attention (a failed last fire,
a parked entry) from the cron server. A server that does not answer leaves its lines out: the
tick still runs.
"""

from __future__ import annotations

import logging

from orchestrator.mesh import Mesh
from shared.protocol.audit.methods import GoalListParams, GoalListRequest, GoalListResult
from shared.protocol.cron import ListParams, ListRequest, ListResult

logger = logging.getLogger("nexo.autonomy")

REQUEST_TIMEOUT_S = 10.0
BACKGROUND_KINDS = frozenset({"bg", "daemon_worker"})


async def _goals(mesh: Mesh, audit_server: str, agent: str) -> list[str]:
    audit = mesh.get(audit_server)
    if audit is None:
        return []
    try:
        found = await audit.request(
            GoalListRequest(params=GoalListParams(agent=agent, active_only=True, limit=50)),
            GoalListResult,
            timeout=REQUEST_TIMEOUT_S,
        )
    except Exception as exc:  # noqa: BLE001 -- the tick runs without these lines
        logger.info("pending goals of %s not read: %s: %s", agent, type(exc).__name__, exc)
        return []
    # Conversations are the intake's and ticks and cron fires are the runtime's: the agent's own
    # pending work is its background runs.
    return [
        f"goal {goal.id} ({goal.kind}, {goal.status}): {goal.prompt}"
        for goal in found.goals
        if goal.kind in BACKGROUND_KINDS
    ]


async def _cron(mesh: Mesh, cron_server: str, agent: str) -> list[str]:
    cron = mesh.get(cron_server)
    if cron is None:
        return []
    try:
        found = await cron.request(
            ListRequest(params=ListParams(binding=agent)), ListResult, timeout=REQUEST_TIMEOUT_S
        )
    except Exception as exc:  # noqa: BLE001 -- the tick runs without these lines
        logger.info("pending cron entries of %s not read: %s: %s", agent, type(exc).__name__, exc)
        return []
    lines: list[str] = []
    for entry in found.entries:
        if entry.state == "parked":
            lines.append(
                f"cron {entry.id} is parked after missed slots (cron_resume starts it): {entry.text}"
            )
        elif entry.state == "active" and entry.last_fire == "failed":
            lines.append(f"cron {entry.id} failed its last fire: {entry.text}")
    return lines


async def pending_items(
    mesh: Mesh, *, audit_server: str, cron_server: str, agent: str, wake_note: str | None
) -> list[str]:
    """The lines of a tick's ``Pending:`` list for ``agent``, most pressing first."""
    items: list[str] = []
    if wake_note is not None:
        items.append(f"you asked to be woken now: {wake_note or 'no reason given'}")
    items.extend(await _cron(mesh, cron_server, agent))
    items.extend(await _goals(mesh, audit_server, agent))
    return items
