"""``nexo run`` in this process with the dashboard on a free port: console, inbox, notes, audit,
pairing, cron and memory servers as real child processes, a scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from orchestrator.config.loading import load
from orchestrator.control import ask
from orchestrator.daemon.orchestrator import Orchestrator
from orchestrator.sockets import control_path
from tests.mesh.harness import python_server, write_config
from tests.mesh.inbox import inbox_server

START_TIMEOUT_S = 60.0


@asynccontextmanager
async def nexo(tmp_path: Path, llm_url: str) -> AsyncIterator[Orchestrator]:
    """The daemon until the block ends; then what SIGTERM runs."""
    config = write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={
            "console": python_server("channel_servers.console"),
            "notes": python_server("tests.fakes.notes_server", env={"NOTES_FILE": str(tmp_path / "notes")}),
            "audit": python_server("servers.audit"),
            "pairing": python_server("servers.pairing"),
            "cron": python_server("servers.cron"),
            "memory": python_server("servers.memory"),
            "inbox": inbox_server(tmp_path),
        },
        agent={"channels": ["console", "inbox"]},
        extra={"dashboard": {"port": 0}},
    )
    orch = Orchestrator(load(config), config_label=str(config))
    ready = anyio.Event()

    async def on_ready(_: Orchestrator) -> None:
        ready.set()
        await anyio.sleep_forever()

    async with anyio.create_task_group() as tg:
        with anyio.fail_after(START_TIMEOUT_S):
            tg.start_soon(partial(orch.run, on_ready=on_ready))
            await ready.wait()
        yield orch
        await orch.shutdown()


async def ledger(state: Path, **params: Any) -> list[dict[str, Any]]:
    """Ledger entries as the dashboard reads them: through the daemon's control socket."""
    answer = await ask(
        control_path(state),
        {"op": "request", "server": "audit", "method": "nexo/audit/tail", "params": params},
    )
    entries: list[dict[str, Any]] = answer["result"]["entries"]
    return entries


async def login_link(state: Path, operator: str = "ana") -> str:
    """What `nexo dashboard` prints as the login link."""
    answer = await ask(control_path(state), {"op": "dashboard_login", "operator": operator})
    link: str = answer["login_url"]
    return link
