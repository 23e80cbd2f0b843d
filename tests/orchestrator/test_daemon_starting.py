"""A command that needs the agents, sent while the daemon is still starting its servers, waits a
little for them and otherwise says the daemon is starting (never "no agent" for an agent that is
configured)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.config.loading import load
from orchestrator.daemon.orchestrator import Orchestrator
from tests.mesh.harness import write_config

pytestmark = pytest.mark.anyio


def _starting(tmp_path: Path) -> Orchestrator:
    config_path = write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url="http://127.0.0.1:9/v1",
    )
    return Orchestrator(load(config_path), config_label=str(config_path))


async def _no_progress(_: dict[str, Any]) -> None:
    raise AssertionError("no progress is expected")


async def test_a_goal_sent_before_the_agents_exist_is_told_the_daemon_is_starting(tmp_path: Path) -> None:
    orch = _starting(tmp_path)
    orch.ready_wait_s = 0.01
    for op in ("submit", "run", "send", "cron_create"):
        answer = await orch.command({"op": op, "prompt": "hi"}, _no_progress)
        assert answer == {
            "error": "nexo is still starting (its servers are not all up yet); "
            "try again in a moment, or see `nexo status`"
        }, op
    # What does not need the agents is answered at once.
    assert "servers" in await orch.command({"op": "channels"}, _no_progress)


async def test_a_goal_sent_while_starting_goes_ahead_once_the_daemon_is_ready(tmp_path: Path) -> None:
    orch = _starting(tmp_path)
    answers: list[dict[str, Any]] = []

    async def submit() -> None:
        answers.append(await orch.command({"op": "submit", "prompt": "hi"}, _no_progress))

    with anyio.fail_after(orch.ready_wait_s / 2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(submit)
            await anyio.wait_all_tasks_blocked()
            assert answers == []
            orch.ready.set()
    # Past the wait, the request reaches the goal runner (which this test never gave an agent).
    assert answers == [{"error": "no agent 'nexo'; use one of: (none)"}]


class _StuckMesh:
    """A mesh whose servers never finish connecting."""

    def __init__(self) -> None:
        self.entered = anyio.Event()

    async def __aenter__(self) -> _StuckMesh:
        self.entered.set()
        await anyio.sleep_forever()
        return self

    async def __aexit__(self, *_: object) -> None:
        return None


async def test_a_signal_while_the_servers_connect_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signals are watched before the mesh is entered: SIGTERM (or a Ctrl-C's SIGINT) while the
    servers connect ends the start, where it used to reach only the event loop's own handling (and
    SIGTERM's default, which kills the process)."""
    orch = _starting(tmp_path)
    stuck = _StuckMesh()
    monkeypatch.setattr(orch, "mesh", stuck)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(orch.run)
            await stuck.entered.wait()
            os.kill(os.getpid(), signal.SIGTERM)
    assert not orch.ready.is_set()
