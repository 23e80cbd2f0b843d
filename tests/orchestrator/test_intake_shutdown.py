"""A shutdown that lands right after a reply went out: the exchange is still in the transcript and
the message is acknowledged, so a restarted orchestrator neither forgets nor answers it again."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.config.loading import load
from orchestrator.daemon.orchestrator import Orchestrator
from tests.fakes.llm import FakeLLM
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.harness import python_server, write_config
from tests.mesh.inbox import inbox_server, reply_texts, say

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]


def _config(tmp_path: Path, llm_url: str) -> Path:
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={"inbox": inbox_server(tmp_path), "memory": python_server("servers.memory")},
        agent={"channels": ["inbox"]},
        # No drain: the stop cancels at once, right after the reply went out.
        extra={"shutdown_drain_s": 0},
    )


@asynccontextmanager
async def _orchestrator(config_path: Path) -> AsyncIterator[tuple[Orchestrator, anyio.Event]]:
    """The daemon in this process, until ``shutdown()`` (what SIGTERM runs) has stopped it."""
    orch = Orchestrator(load(config_path), config_label=str(config_path))
    ready, stopped = anyio.Event(), anyio.Event()

    async def on_ready(_: Orchestrator) -> None:
        ready.set()
        await anyio.sleep_forever()

    async def run() -> None:
        await orch.run(on_ready=on_ready)
        stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(60):
            await ready.wait()
        yield orch, stopped


def _transcript(state: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(state / "memory" / "memory.db") as db:
        return db.execute("SELECT role, content FROM transcript ORDER BY id").fetchall()


def _unacked(state: Path) -> list[str]:
    with sqlite3.connect(state / "inbox" / "inbox.db") as db:
        return [row[0] for row in db.execute("SELECT dedupe_key FROM events WHERE acked_at IS NULL")]


async def test_a_shutdown_right_after_the_reply_keeps_the_transcript_and_the_ack(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with FakeLLM(default=ModelReply("Noted, see you tomorrow.")) as llm:
        config = _config(tmp_path, llm.openai_base_url)
        async with _orchestrator(config) as (orch, stopped):
            intake = orch.intakes[0]
            original = intake.send

            async def send_then_stop(*args: Any, **kwargs: Any) -> None:
                await original(*args, **kwargs)
                # The stop lands before the reply's bookkeeping has started.
                await orch.shutdown()

            intake.send = send_then_stop  # type: ignore[method-assign]
            await say(tmp_path, "m1", "remind me about the dentist")
            with anyio.fail_after(30):
                await stopped.wait()
        answered = len(llm.requests)
        assert reply_texts(tmp_path) == ["Noted, see you tomorrow."]
        assert [role for role, _ in _transcript(state)] == ["user", "assistant"]
        assert "remind me about the dentist" in _transcript(state)[0][1]
        assert _unacked(state) == []

        # A restart: the message is not answered again, and the conversation goes on from the transcript.
        async with _orchestrator(config) as (orch, stopped):
            intake = orch.intakes[0]
            original, answered_again = intake.send, anyio.Event()

            async def send_and_tell(*args: Any, **kwargs: Any) -> None:
                await original(*args, **kwargs)
                answered_again.set()

            intake.send = send_and_tell  # type: ignore[method-assign]
            await say(tmp_path, "m2", "and the car?")
            with anyio.fail_after(30):
                await answered_again.wait()
            await orch.shutdown()
            with anyio.fail_after(30):
                await stopped.wait()
        assert reply_texts(tmp_path) == ["Noted, see you tomorrow."] * 2
    assert len(llm.requests) == answered + 1
    follow_up = llm.requests[-1].body["messages"]
    contents = [m.get("content") for m in follow_up if isinstance(m.get("content"), str)]
    assert any("remind me about the dentist" in c for c in contents)
    assert any("and the car?" in c for c in contents)
