"""Config pollers the cron server refuses, named by their key in the config.

The cron server owns schedule parsing (the minimum gap, DST, the forms it accepts), so the check
asks it: ``nexo run --check-config`` with a dry run, ``nexo run`` with each sync. A refused poller
is reported on its own; the agent's other pollers run.
"""

from __future__ import annotations

from collections.abc import Mapping

import anyio

from orchestrator.config.nexo import NexoConfig
from orchestrator.mesh import ServerConnection
from shared.protocol.cron import PollerSpec, SyncPollersParams, SyncPollersRequest, SyncPollersResult

CHECK_TIMEOUT_S = 30.0


def refused_pollers(config: NexoConfig, agent_id: str, refused: Mapping[str, str]) -> list[str]:
    """One line per refused poller of ``agent_id``: its key path, why, and the fix."""
    lines = []
    for i, agent in enumerate(config.agents):
        if agent.id != agent_id:
            continue
        for k, poller in enumerate(agent.pollers):
            if poller.name in refused:
                lines.append(
                    f"agents[{i}].pollers[{k}].schedule: poller {poller.name!r} of agent {agent.id} is "
                    f"refused: {refused[poller.name]}. Fix: change the schedule, then check it with "
                    "`nexo run --check-config`"
                )
    return lines


async def check_pollers(config: NexoConfig, connection: ServerConnection) -> list[str]:
    """Ask the cron server (connected here, for the check alone) which pollers it would refuse."""
    problems: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.run)
        await connection.wait_ready(timeout=CHECK_TIMEOUT_S)
        for agent in config.agents:
            if not agent.pollers:
                continue
            pollers = [PollerSpec.model_validate(p.model_dump()) for p in agent.pollers]
            params = SyncPollersParams(binding=agent.id, agent=agent.id, pollers=pollers, dry_run=True)
            result = await connection.request(
                SyncPollersRequest(params=params), SyncPollersResult, timeout=CHECK_TIMEOUT_S
            )
            problems += refused_pollers(config, agent.id, result.refused)
        tg.cancel_scope.cancel()
    return problems
