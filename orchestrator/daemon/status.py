"""What ``nexo status`` shows of a running daemon, and the gauges its /metrics reads at scrape time."""

from __future__ import annotations

import os
import time
from typing import Any, Protocol

from orchestrator.config.nexo import NexoConfig
from orchestrator.goals import AuditSink, GoalTracker
from orchestrator.intake import Intake
from orchestrator.mesh import Mesh
from orchestrator.metrics import Metrics, memory_server_metrics, server_gauges
from orchestrator.proactive.runtime import Autonomy
from orchestrator.storage import StorageWatch


class Observed(Protocol):
    """The parts of the running daemon its status is read from."""

    config: NexoConfig
    config_label: str
    started: float
    mesh: Mesh
    intakes: list[Intake]
    storage: StorageWatch
    autonomy: Autonomy
    goals: GoalTracker
    sink: AuditSink
    metrics: Metrics
    metrics_address: tuple[str, int] | None


def status_report(daemon: Observed) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "config": daemon.config_label,
        "state_dir": str(daemon.config.state_path),
        "uptime_s": round(time.time() - daemon.started, 1),
        "servers": [s.as_dict() for s in daemon.mesh.snapshots()],
        "agents": [
            {
                "id": intake.agent.id,
                "provider": intake.provider.describe(),
                "channels": intake.agent.channels,
                "handled": intake.handled,
                "pending_approvals": intake.broker.open_requests,
            }
            for intake in daemon.intakes
        ],
        "warnings": warnings(daemon.config, daemon.storage),
        "refused": refused(daemon.intakes),
        "storage": daemon.storage.status(),
        "autonomy": daemon.autonomy.status(),
        "goals": {
            "live": [
                {"id": g.id, "agent": g.agent, "kind": g.kind, "origin": g.origin.source}
                for g in daemon.goals.live.values()
            ],
            "audit": {
                "sent": daemon.sink.sent,
                "queued": daemon.sink.pending,
                "dropped": daemon.sink.dropped,
            },
        },
        "metrics": {
            "url": f"http://{daemon.metrics_address[0]}:{daemon.metrics_address[1]}/metrics"
            if daemon.metrics_address
            else None,
            "counters": refreshed(daemon).summary(),
        },
    }


def refused(intakes: list[Intake]) -> list[dict[str, Any]]:
    """What the pairing gate refused since start, per agent, channel, reason and source."""
    return [
        {"agent": intake.agent.id, **row}
        for intake in intakes
        for row in intake.admissions.refusals.as_json()
    ]


def warnings(config: NexoConfig, storage: StorageWatch) -> list[str]:
    """Shown by `nexo status` and on the operator's chat for as long as they hold."""
    found = []
    for agent in config.agents:
        policies = {"": agent.permissions, **{f" on {c}": p for c, p in agent.bindings.items()}}
        for where, policy in policies.items():
            if policy.dangerous_mode:
                found.append(
                    f"DANGEROUS MODE is on for agent {agent.id}{where}: tool calls run without asking"
                )
    return found + storage.warnings()


def refreshed(daemon: Observed) -> Metrics:
    """Gauges read at scrape time from the live objects."""
    m = daemon.metrics
    server_gauges(m, {s.name: (s.state == "ready", s.restarts) for s in daemon.mesh.snapshots()})
    m.audit_queue.set(daemon.sink.pending)
    m.audit_dropped.set(daemon.sink.dropped)
    kinds = [g.kind for g in daemon.goals.live.values()]
    for kind in ("interactive", "bg", "daemon", "daemon_worker"):
        m.live_goals.labels(kind).set(kinds.count(kind))
    for intake in daemon.intakes:
        m.approvals_pending.labels(intake.agent.id).set(len(intake.broker.open_requests))
    return m


async def memory_metrics(config: NexoConfig, mesh: Mesh) -> str:
    """What the agents' memory servers export, appended to the orchestrator's /metrics."""
    names = {agent.memory.server for agent in config.agents}
    return await memory_server_metrics({n: c for n, c in mesh.connections.items() if n in names})
