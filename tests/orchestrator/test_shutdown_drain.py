"""SIGTERM drains: the model and tool calls in flight finish within ``shutdown_drain_s``, the answer is
delivered and acknowledged and nothing runs again after the restart; what cannot finish in time is
cancelled, recorded in the ledger, and answered after the restart. In this process, with real audit
and inbox servers and a fake model that answers only when the test lets it."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from orchestrator.config.loading import load
from orchestrator.daemon.orchestrator import Orchestrator
from orchestrator.intake.intake import Intake
from tests.fakes.llm import FakeLLM, RecordedRequest
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.harness import python_server, write_config
from tests.mesh.inbox import inbox_server, reply_texts, say

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]

WAIT_S = 30.0


def _config(tmp_path: Path, llm_url: str, drain_s: float) -> Path:
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={"inbox": inbox_server(tmp_path), "audit": python_server("servers.audit")},
        agent={"channels": ["inbox"]},
        extra={"shutdown_drain_s": drain_s},
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
        with anyio.fail_after(60):
            tg.start_soon(run)
            await ready.wait()
        yield orch, stopped


class SlowModel:
    """Answers a request only once the test releases it (its first request), or at once (later ones)."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.release = threading.Event()

    def __call__(self, request: RecordedRequest) -> ModelReply:
        if request.index == 0:
            self.release.wait(WAIT_S)
        return ModelReply(f"{self.answer} #{request.index + 1}")


async def _requests(llm: FakeLLM, count: int) -> None:
    await anyio.to_thread.run_sync(llm.wait_for_requests, count)


def _unacked(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "state" / "inbox" / "inbox.db") as db:
        return [row[0] for row in db.execute("SELECT dedupe_key FROM events WHERE acked_at IS NULL")]


def _ledger_subjects(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "state" / "audit" / "audit.db") as db:
        return [row[0] for row in db.execute("SELECT subject FROM ledger WHERE kind = 'notice'")]


async def _answer_after_restart(
    config: Path, tmp_path: Path, replies: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart and one new message; stops once ``replies`` answers went out (the drain acknowledges
    the last). Anything left over from before the restart is answered before the new message, and
    may be answered before the restarted daemon reports ready: the count starts before the start."""
    original, sent = Intake.send, [0]
    enough = anyio.Event()

    async def counted(self: Intake, *args: Any, **kwargs: Any) -> None:
        await original(self, *args, **kwargs)
        sent[0] += 1
        if sent[0] == replies:
            enough.set()

    monkeypatch.setattr(Intake, "send", counted)
    async with _orchestrator(config) as (orch, stopped):
        await say(tmp_path, "m2", "and now?")
        with anyio.fail_after(WAIT_S):
            await enough.wait()
        await orch.shutdown()
        with anyio.fail_after(WAIT_S):
            await stopped.wait()
    assert _unacked(tmp_path) == []


async def test_sigterm_during_a_slow_model_call_delivers_the_answer_then_exits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = SlowModel("the answer")
    with FakeLLM(default=model) as llm:
        config = _config(tmp_path, llm.openai_base_url, drain_s=WAIT_S)
        try:
            async with _orchestrator(config) as (orch, stopped), anyio.create_task_group() as tg:
                await say(tmp_path, "m1", "take your time")
                with anyio.fail_after(WAIT_S):
                    await _requests(llm, 1)
                tg.start_soon(orch.shutdown)
                with anyio.fail_after(WAIT_S):
                    while not orch.intakes[0].draining:
                        await anyio.wait_all_tasks_blocked()
                model.release.set()
                with anyio.fail_after(WAIT_S):
                    await stopped.wait()
        finally:
            model.release.set()
        assert reply_texts(tmp_path) == ["the answer #1"]
        assert _unacked(tmp_path) == []
        assert "shutdown cancelled goals" not in _ledger_subjects(tmp_path)
        await _answer_after_restart(config, tmp_path, replies=1, monkeypatch=monkeypatch)
    assert reply_texts(tmp_path) == ["the answer #1", "the answer #2"]  # m1 was not answered again
    assert len(llm.requests) == 2


async def test_a_call_longer_than_the_drain_is_cancelled_recorded_and_answered_after_the_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = SlowModel("answer")
    with FakeLLM(default=model) as llm:
        config = _config(tmp_path, llm.openai_base_url, drain_s=0.2)
        try:
            async with _orchestrator(config) as (orch, stopped):
                await say(tmp_path, "m1", "this will take long")
                with anyio.fail_after(WAIT_S):
                    await _requests(llm, 1)
                await orch.shutdown()
                with anyio.fail_after(WAIT_S):
                    await stopped.wait()
        finally:
            model.release.set()
        texts = reply_texts(tmp_path)
        assert len(texts) == 1
        assert texts[0].startswith("[shutdown] nexo is stopping while working on this")
        assert _unacked(tmp_path) != []
        assert "shutdown cancelled goals" in _ledger_subjects(tmp_path)
        await _answer_after_restart(config, tmp_path, replies=2, monkeypatch=monkeypatch)
    assert reply_texts(tmp_path)[1:] == ["answer #2", "answer #3"]  # m1 answered after the restart, then m2
