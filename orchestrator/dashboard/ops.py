"""The daemon's side of the dashboard: the control-socket operations it adds.

``dashboard_login`` mints a one-time login link (what ``nexo dashboard`` prints); ``approvals`` and
``approve`` list and answer pending prompts as one more approval surface.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio.abc

from orchestrator.permissions.answers import answer_approval, pending_approvals

if TYPE_CHECKING:
    from orchestrator.config.nexo import NexoConfig
    from orchestrator.dashboard.serve import DashboardServer
    from orchestrator.intake import Intake

logger = logging.getLogger("nexo.dashboard")
DASHBOARD_OPS = frozenset({"dashboard_login", "approvals", "approve"})


class HasSurfaces(Protocol):
    intakes: list[Intake]
    dashboard: DashboardServer | None


def dashboard_command(daemon: HasSurfaces, request: dict[str, Any]) -> dict[str, Any]:
    brokers = [intake.broker for intake in daemon.intakes]
    op = request.get("op")
    if op == "approvals":
        return pending_approvals(brokers)
    if op == "approve":
        return answer_approval(brokers, request)
    if daemon.dashboard is None or daemon.dashboard.url is None:
        return {
            "error": "the dashboard is off: set dashboard.port (e.g. 8780) in the config, or "
            "NEXO_DASHBOARD__PORT=8780, and restart `nexo run`"
        }
    return daemon.dashboard.login(str(request.get("operator") or "operator"))


async def start_dashboard(
    tg: anyio.abc.TaskGroup, config: NexoConfig, control: Path
) -> DashboardServer | None:
    """Serve the dashboard in ``tg`` when ``dashboard.port`` is set; a port in use is logged, not fatal."""
    options = config.dashboard
    if options.port is None:
        return None
    from orchestrator.dashboard.client import Daemon
    from orchestrator.dashboard.serve import DashboardServer

    budgets = {
        "autonomy": {name: budget.model_dump() for name, budget in config.autonomy.budgets.items()},
        "per_goal_tokens": {agent.id: agent.budgets.max_tokens for agent in config.agents},
        "prices": {key: price.model_dump() for key, price in config.autonomy.prices.items()},
        "day_timezone": config.autonomy.day_timezone,
    }
    daemon = Daemon(
        control,
        config.audit.server,
        config.pairing.server,
        config.cron.server,
        config.agents[0].memory.server,
        budgets,
    )
    dashboard = DashboardServer(options, daemon)
    try:
        url = await tg.start(dashboard.serve, name="dashboard")
    except OSError as exc:
        from shared.hosting.listener import ListenError

        why = (
            exc.advice("dashboard.port")
            if isinstance(exc, ListenError)
            else f"{exc}; choose a free dashboard.port"
        )
        logger.error("dashboard not served: %s (nexo goes on without it)", why)
        return None
    logger.info("dashboard at %s/ (log in with `nexo dashboard`)", url)
    return dashboard
