"""Goals across restarts: the boot sweep, shutdown notices, background goals, `agent ps` offline."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.cli.chat_loop import ChatSession
from shared.protocol.console_wire import Reply, Say
from tests.fakes.llm import FakeLLM, RecordedRequest, ScriptItem
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.console import operator as open_operator
from tests.mesh.harness import nexo, python_server, running, write_config

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]
WAIT_S = 30.0


def _config(tmp_path: Path, llm_url: str, **extra: object) -> Path:
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={
            "console": python_server("channel_servers.console"),
            "audit": python_server("servers.audit"),
            "time": python_server("servers.time"),
        },
        extra=extra,
    )


class Gate:
    """A model answer that waits until the test lets it go (bounded)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.release = threading.Event()
        self.entered = threading.Event()

    def __call__(self, _: RecordedRequest) -> ModelReply:
        self.entered.set()
        self.release.wait(WAIT_S)
        return ModelReply(self.text)


async def _replies(session: ChatSession, count: int) -> list[Reply]:
    found: list[Reply] = []
    with anyio.fail_after(WAIT_S):
        while len(found) < count:
            frame = await session.receive()
            if isinstance(frame, Reply):
                found.append(frame)
    return found


def _goals(config: Path, *extra: str) -> list[dict[str, Any]]:
    result = nexo("agent", "ps", "--all", "--json", "--config", str(config), *extra)
    assert result.returncode == 0, result.stderr
    goals: list[dict[str, Any]] = json.loads(result.stdout)["goals"]
    return goals


async def test_a_killed_orchestrator_leaves_lost_goals_whose_chat_is_told_exactly_once(
    tmp_path: Path,
) -> None:
    stuck = Gate("too late")
    script: list[ScriptItem] = [stuck]
    with FakeLLM(script) as llm, running(_config(tmp_path, llm.openai_base_url)) as orch:
        async with open_operator(tmp_path / "state") as operator:
            await operator.send(Say(id="m1", text="think hard"))
            assert await anyio.to_thread.run_sync(stuck.entered.wait, WAIT_S)
        orch.process.send_signal(signal.SIGKILL)
        orch.process.wait(WAIT_S)
        stuck.release.set()
    config = _config(tmp_path, "http://127.0.0.1:9/v1")
    (lost,) = _goals(config)  # the daemon is down: ps reads the audit server directly
    assert (lost["kind"], lost["status"], lost["prompt"]) == ("interactive", "running", "think hard")

    with (
        FakeLLM([ModelReply("answered after the restart")]) as llm,
        running(_config(tmp_path, llm.openai_base_url)),
    ):
        async with open_operator(tmp_path / "state") as operator:
            notice, answer = await _replies(operator, 2)
    assert notice.notice
    assert notice.text.startswith(f"[abandoned] nexo restarted while working on this (goal {lost['id']})")
    assert (answer.reply_to, answer.text) == ("m1", "answered after the restart")

    with FakeLLM([]) as llm, running(_config(tmp_path, llm.openai_base_url)) as orch:
        orch.wait_for_line("boot sweep: 0 lost (0 told)")
    goals = {g["id"]: g for g in _goals(config)}
    assert (goals[lost["id"]]["status"], goals[lost["id"]]["notified"]) == ("lost_on_restart", True)
    assert sorted(g["status"] for g in goals.values()) == ["done", "lost_on_restart"]


async def test_sigterm_tells_each_chat_with_a_goal_in_flight_before_the_channels_close(
    tmp_path: Path,
) -> None:
    stuck = Gate("never shown")
    # The model call outlasts the drain, so it is cancelled and its chat told.
    with (
        FakeLLM([stuck]) as llm,
        running(_config(tmp_path, llm.openai_base_url, shutdown_drain_s=0.5)) as orch,
    ):
        async with open_operator(tmp_path / "state") as operator:
            await operator.send(Say(id="m1", text="long job"))
            assert await anyio.to_thread.run_sync(stuck.entered.wait, WAIT_S)
            orch.process.send_signal(signal.SIGTERM)
            (notice,) = await _replies(operator, 1)
        assert orch.process.wait(WAIT_S) == 0
        stuck.release.set()
    assert notice.notice
    assert notice.text.startswith("[shutdown] nexo is stopping while working on this (goal g-")
    (goal,) = _goals(_config(tmp_path, "http://127.0.0.1:9/v1"))
    assert (goal["status"], goal["outcome"]) == ("cancelled", "shutdown")


async def test_a_background_goal_runs_in_the_daemon_and_can_be_attached_to_and_cancelled(
    tmp_path: Path,
) -> None:
    stuck = Gate("unused")
    with FakeLLM([ModelReply("the plants are watered"), stuck]) as llm:
        config = _config(tmp_path, llm.openai_base_url)
        with running(config) as orch:
            started = nexo("agent", "run", "--bg", "water the plants", "--config", str(config))
            assert started.returncode == 0, started.stderr
            goal_id = started.stdout.strip()
            orch.wait_for_line("goal ended: done")
            attached = nexo("agent", "attach", goal_id, "--config", str(config))

            second = nexo("agent", "run", "--bg", "wait forever", "--config", str(config), "--json")
            second_id = json.loads(second.stdout)["goal_id"]
            assert await anyio.to_thread.run_sync(stuck.entered.wait, WAIT_S)
            cancelled = nexo("agent", "cancel", second_id, "--config", str(config))
            orch.wait_for_line(f"goal {second_id} cancelled")
            unknown = nexo("agent", "cancel", "g-nosuch", "--config", str(config))
            stuck.release.set()
        goals = {g["id"]: g for g in _goals(config)}
    assert goal_id.startswith("g-")
    assert attached.stdout.startswith(f"## Goal {goal_id}: done (bg)")
    assert "the plants are watered" in attached.stdout
    assert cancelled.stdout == f"cancelled {second_id}\n"
    assert (goals[goal_id]["kind"], goals[goal_id]["status"]) == ("bg", "done")
    assert goals[second_id]["status"] == "cancelled"
    assert unknown.returncode == 1
    assert "no live goal 'g-nosuch'" in unknown.stderr


def test_bg_without_a_running_daemon_says_how_to_start_it(tmp_path: Path) -> None:
    result = nexo("agent", "run", "--bg", "x", "--config", str(_config(tmp_path, "http://127.0.0.1:9/v1")))
    assert result.returncode == 1
    assert "nexo is not running on" in result.stderr
    assert "start it with `nexo run`" in result.stderr


async def test_a_background_goal_interrupted_by_a_crash_resumes_at_the_next_start(tmp_path: Path) -> None:
    stuck = Gate("unused")
    with FakeLLM([stuck]) as llm:
        config = _config(tmp_path, llm.openai_base_url)
        with running(config) as orch:
            started = nexo("agent", "run", "--bg", "tidy the notes", "--config", str(config))
            goal_id = started.stdout.strip()
            assert await anyio.to_thread.run_sync(stuck.entered.wait, WAIT_S)
            orch.process.send_signal(signal.SIGKILL)
            orch.process.wait(WAIT_S)
        stuck.release.set()
    resumed: list[str] = []

    def answer(request: RecordedRequest) -> ModelReply:
        resumed.append(request.last_user_text or "")
        return ModelReply("notes tidied")

    with FakeLLM([answer]) as llm:
        config = _config(tmp_path, llm.openai_base_url)
        with running(config) as orch:
            orch.wait_for_line(f"resuming bg goal {goal_id}")
            orch.wait_for_line(f"goal {goal_id} done")
    (goal,) = _goals(config)
    assert resumed == ["tidy the notes"]
    assert (goal["id"], goal["kind"], goal["status"]) == (goal_id, "bg", "done")
