"""Each agent's turn path: its model provider and its intake with the approval broker it asks."""

from __future__ import annotations

import logging

from orchestrator.config.agents import AgentConfig
from orchestrator.config.nexo import NexoConfig
from orchestrator.goals import AuditSink, GoalTracker
from orchestrator.intake import Intake
from orchestrator.intake.seen import SeenPushes
from orchestrator.llm import Provider, build_provider
from orchestrator.mesh import Mesh
from orchestrator.metrics import Metrics
from orchestrator.permissions import ApprovalBroker

logger = logging.getLogger("nexo.daemon")


def build_providers(config: NexoConfig, providers: dict[str, Provider]) -> None:
    """One provider per name the agents use, added to ``providers``."""
    for agent in config.agents:
        name = agent.model.provider
        if name not in providers:
            providers[name] = build_provider(name, config.llm.providers[name])


def agent_intake(
    config: NexoConfig,
    agent: AgentConfig,
    mesh: Mesh,
    provider: Provider,
    *,
    goals: GoalTracker,
    sink: AuditSink,
    metrics: Metrics,
    seen: SeenPushes,
) -> Intake:
    """The intake that runs ``agent``'s turns, asking approvals for as long as its channels wait."""
    broker = ApprovalBroker(
        timeout_s=min(config.channel(c).approval_timeout_s for c in agent.channels)
        if agent.channels
        else 600.0,
        sink=sink,
        agent=agent.id,
    )
    intake = Intake(config, agent, mesh, provider, broker, goals=goals, sink=sink, metrics=metrics, seen=seen)
    logger.info(
        "agent %s uses %s and answers %s", agent.id, provider.describe(), agent.channels or "no channels"
    )
    return intake
