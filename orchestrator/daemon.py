"""``nexo run``: the mesh, the intake for every agent, the control socket, until a signal."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from orchestrator.config import NexoConfig
from orchestrator.control import control_path, serve_control
from orchestrator.intake import Intake
from orchestrator.llm import Provider, build_provider
from orchestrator.lock import InstanceLock
from orchestrator.mesh import Mesh
from orchestrator.permissions import ApprovalBroker

logger = logging.getLogger("nexo.daemon")
STARTUP_WAIT_S = 30.0


def child_env(config: NexoConfig) -> dict[str, str]:
    return {
        "NEXO_STATE_DIR": str(config.state_path),
        "NEXO_LOG_LEVEL": os.environ.get("NEXO_LOG_LEVEL", "WARNING"),
    }


class Orchestrator:
    def __init__(self, config: NexoConfig, *, config_label: str) -> None:
        self.config = config
        self.config_label = config_label
        self.mesh = Mesh(config.servers, config.supervision, base_env=child_env(config))
        self.providers: dict[str, Provider] = {}
        self.intakes: list[Intake] = []
        self.started = time.time()
        self.ready = anyio.Event()

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
        }

    async def run(self, *, on_ready: Callable[[Orchestrator], Awaitable[None]] | None = None) -> None:
        state = self.config.state_path
        with InstanceLock(state, config=self.config_label):
            async with self.mesh, anyio.create_task_group() as tg:
                tg.start_soon(self._signals, tg.cancel_scope)
                await tg.start(serve_control, control_path(state), self.status)
                missing = await self.mesh.wait_ready(STARTUP_WAIT_S)
                for name in missing:
                    snap = self.mesh[name].snapshot()
                    logger.warning(
                        "server %s is not ready yet (%s); continuing, it keeps retrying",
                        name,
                        snap.last_error,
                    )
                for agent in self.config.agents:
                    provider = self.providers.get(agent.model.provider)
                    if provider is None:
                        provider = build_provider(
                            agent.model.provider, self.config.llm.providers[agent.model.provider]
                        )
                        self.providers[agent.model.provider] = provider
                    broker = ApprovalBroker(
                        timeout_s=min(self.config.channel(c).approval_timeout_s for c in agent.channels)
                        if agent.channels
                        else 600.0
                    )
                    intake = Intake(self.config, agent, self.mesh, provider, broker)
                    self.intakes.append(intake)
                    tg.start_soon(intake.run, name=f"intake:{agent.id}")
                    logger.info(
                        "agent %s uses %s and answers %s",
                        agent.id,
                        provider.describe(),
                        agent.channels or "no channels",
                    )
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

    @staticmethod
    async def _signals(scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                logger.info("received %s: shutting down", signal.Signals(signum).name)
                scope.cancel()
                return
