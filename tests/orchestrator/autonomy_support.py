"""A real orchestrator in this process, with real audit and inbox servers, for autonomy tests."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from orchestrator.config.loading import load
from orchestrator.daemon.orchestrator import Orchestrator
from orchestrator.proactive.runtime import Autonomy
from tests.mesh.harness import python_server, write_config
from tests.mesh.inbox import inbox_server
from tests.orchestrator.daemon_support import daemon_in_process

DAY_START = datetime(2026, 11, 21, 0, 0, tzinfo=UTC)


@dataclass
class Clock:
    now: datetime = DAY_START

    def __call__(self) -> datetime:
        return self.now


def autonomy_config(tmp_path: Path, llm_url: str, agent: dict[str, Any], autonomy: dict[str, Any]) -> Path:
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={
            "inbox": inbox_server(tmp_path),
            "audit": python_server("servers.audit"),
        },
        agent={"channels": ["inbox"], **agent},
        extra={"operator": {"channel": "inbox", "chat_id": "op"}, "autonomy": autonomy},
    )


@asynccontextmanager
async def running(config_path: Path, clock: Callable[[], datetime]) -> AsyncIterator[Orchestrator]:
    """The daemon in this process, its autonomy on ``clock``; the loops themselves are not started."""
    config = load(config_path)
    orch = Orchestrator(config, config_label=str(config_path))
    orch.autonomy = Autonomy(config, orch.mesh, orch.sink, clock=clock, rng=random.Random(3))
    async with daemon_in_process(orch, 60):
        try:
            yield orch
        finally:
            with anyio.CancelScope(shield=True):
                await orch.sink.flush(5)
