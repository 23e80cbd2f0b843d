"""The bookkeeping of a reply (the goal's end in the registry, the transcript write, the ack) is off
the path of the reply and of the session's next message, and keeps its order and its promises."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.config.loading import load
from orchestrator.daemon.orchestrator import Orchestrator
from orchestrator.goals import TrackedGoal
from orchestrator.loop import GoalResult
from tests.fakes.llm import FakeLLM
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.harness import write_config
from tests.mesh.inbox import inbox_server, reply_texts, say
from tests.orchestrator.daemon_support import daemon_in_process

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]

WAIT_S = 30.0


def _unacked(directory: Path) -> list[str]:
    with sqlite3.connect(directory / "state" / "inbox" / "inbox.db") as db:
        return [row[0] for row in db.execute("SELECT dedupe_key FROM events WHERE acked_at IS NULL")]


async def test_the_next_message_is_answered_while_the_last_ones_bookkeeping_waits(tmp_path: Path) -> None:
    with FakeLLM([ModelReply("first answer"), ModelReply("second answer")]) as llm:
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=llm.openai_base_url,
            servers={"inbox": inbox_server(tmp_path)},
            agent={"channels": ["inbox"]},
        )
        orch = Orchestrator(load(config), config_label=str(config))
        async with daemon_in_process(orch, WAIT_S):
            intake = orch.intakes[0]
            goals_released, stores_released = anyio.Event(), anyio.Event()
            stored: list[str] = []
            finished: list[str] = []
            replied = anyio.Event()
            original_store, original_finish, original_send = (
                intake.sessions.store,
                orch.goals.finish,
                intake.send,
            )

            async def slow_store(key: str, user: str, answer: str, *, turn_id: str) -> None:
                await stores_released.wait()
                stored.append(answer)
                await original_store(key, user, answer, turn_id=turn_id)

            both_finished = anyio.Event()

            async def slow_finish(goal: TrackedGoal, result: GoalResult | None, **kwargs: Any) -> None:
                await goals_released.wait()
                finished.append(goal.id)
                await original_finish(goal, result, **kwargs)
                if len(finished) == 2:
                    both_finished.set()

            async def send_and_tell(*args: Any, **kwargs: Any) -> None:
                await original_send(*args, **kwargs)
                replied.set()

            intake.sessions.store = slow_store  # type: ignore[method-assign]
            orch.goals.finish = slow_finish  # type: ignore[method-assign]
            intake.send = send_and_tell  # type: ignore[method-assign]

            await say(tmp_path, "m1", "first question")
            with anyio.fail_after(WAIT_S):
                await replied.wait()
            # The reply went out while the goal's end in the registry was still held up.
            assert finished == []
            goals_released.set()

            replied = anyio.Event()
            await say(tmp_path, "m2", "second question")
            with anyio.fail_after(WAIT_S):
                await replied.wait()
            # Answered while the first exchange's transcript write still waits: neither is acknowledged.
            assert stored == []
            assert sorted(_unacked(tmp_path)) == ["m1", "m2"]
            assert reply_texts(tmp_path) == ["first answer", "second answer"]

            stores_released.set()
            with anyio.fail_after(WAIT_S):
                await intake.wait_quiet()
            assert stored == ["first answer", "second answer"]
            assert _unacked(tmp_path) == []
            assert intake.handled == 2
            with anyio.fail_after(WAIT_S):
                await both_finished.wait()

    # The second turn saw the first exchange although its transcript write had not happened yet.
    contents = [
        m.get("content") for m in llm.requests[1].body["messages"] if isinstance(m.get("content"), str)
    ]
    assert any("first question" in c for c in contents)
    assert "first answer" in contents
