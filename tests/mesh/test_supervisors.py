"""What supervisors do to a channel server, over Streamable HTTP and over stdio: stop it gracefully
while it is idle and while a turn is in flight, keep it down past the breaker's threshold, start nexo
before it, restart it with another token. The daemon stays up through all of it, every message is
answered exactly once, and the next one within seconds of the server being back.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fakes.llm import FakeLLM, RecordedRequest
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.chaos_support import answer, echo_model, question
from tests.mesh.harness import (
    Orchestrator,
    child_pids,
    free_port,
    nexo,
    nexo_argv,
    running,
    write_config,
)
from tests.mesh.web_channel import (
    SERVER_TOKEN,
    HttpSample,
    Tab,
    http_sample_config,
    page_env,
    page_urls,
    tab,
)

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]

BACK_WITHIN_S = 10.0
"""A generous bound for the answer once the server is back (reconnects come within 0.5 s here)."""
SUPERVISION: dict[str, Any] = {"initial_backoff_s": 0.05, "http_max_backoff_s": 0.5, "failure_threshold": 2}
"""An outage past the threshold takes a few failed connects, not ten seconds."""


class BusyModel:
    """The fake model: answers each message by its id, and holds the answer to ``busy`` until released."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.released = threading.Event()

    def __call__(self, request: RecordedRequest) -> ModelReply:
        if question("busy") in (request.last_user_text or ""):
            self.asked.set()
            self.released.wait(timeout=60)
        return echo_model(request)


class Conversation:
    """Every reply any tab saw, so the end can check each message was answered exactly once."""

    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []

    async def answered(self, page: str, message_id: str) -> str:
        async with tab(page) as opened:
            await opened.say(message_id, question(message_id))
            return await self._answer(opened, message_id)

    async def _answer(self, opened: Tab, message_id: str) -> str:
        try:
            with anyio.fail_after(BACK_WITHIN_S):
                return await opened.answer_to(message_id)
        finally:
            self.replies.extend(opened.replies)

    async def collect(self, page: str, message_id: str) -> str:
        """The answer to a message said earlier, delivered to a tab opened now."""
        async with tab(page) as opened:
            return await self._answer(opened, message_id)

    async def say(self, page: str, message_id: str) -> None:
        async with tab(page) as opened:
            await opened.say(message_id, question(message_id))
            self.replies.extend(opened.replies)

    def counts(self) -> Counter[str]:
        return Counter(str(reply["reply_to"]) for reply in self.replies)


def _config(
    tmp_path: Path, llm: FakeLLM, sample: dict[str, Any], supervision: dict[str, Any] = SUPERVISION
) -> Path:
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm.openai_base_url,
        servers={"sample": sample},
        agent={"channels": ["sample"], "history_turns": 0},
        extra={"supervision": {"initial_backoff_s": 0.05, "max_backoff_s": 0.5, **supervision}},
    )


async def _wait_line(orch: Orchestrator, text: str, start: int) -> int:
    return await anyio.to_thread.run_sync(lambda: orch.wait_for_line(text, 60.0, start=start))


async def _failed_connects(orch: Orchestrator, count: int, start: int) -> None:
    for _ in range(count):
        start = await _wait_line(orch, "server sample: ConnectError", start) + 1


def _status_of_sample(config: Path) -> dict[str, Any]:
    result = nexo("status", "--config", str(config), "--json")
    status: dict[str, Any] = json.loads(result.stdout)
    return next(s for s in status["servers"] if s["name"] == "sample")


@pytest.mark.timeout(300)
async def test_an_http_channel_server_stopped_restarted_and_given_another_token_never_stops_nexo(
    tmp_path: Path,
) -> None:
    model = BusyModel()
    sample = HttpSample(free_port(), tmp_path / "sample-state")
    chat = Conversation()
    try:
        with FakeLLM(default=model) as llm:
            page = await anyio.to_thread.run_sync(sample.start)
            config = _config(tmp_path, llm, http_sample_config(sample))
            with running(config) as orch:
                assert await chat.answered(page, "m1") == answer("m1")

                # SIGTERM while idle (the long poll is in flight), then down past the failure
                # threshold: a server over HTTP never waits out a breaker cooldown.
                mark = len(orch.lines)
                assert await anyio.to_thread.run_sync(sample.stop) == 0
                await _failed_connects(orch, 2 * SUPERVISION["failure_threshold"] + 1, mark)
                page = await anyio.to_thread.run_sync(sample.start)
                assert await chat.answered(page, "m2") == answer("m2")

                # SIGTERM while busy: the model is still composing the answer.
                await chat.say(page, "busy")
                assert await anyio.to_thread.run_sync(model.asked.wait, 60)
                assert await anyio.to_thread.run_sync(sample.stop) == 0
                page = await anyio.to_thread.run_sync(sample.start)
                model.released.set()
                assert await chat.collect(page, "busy") == answer("busy")

                # Restarted with another token: refused, said so, and fine again once it is right.
                mark = len(orch.lines)
                assert await anyio.to_thread.run_sync(sample.stop) == 0
                await anyio.to_thread.run_sync(lambda: sample.start("rotated-token", page=False))
                await _wait_line(orch, "refused the bearer token", mark)
                refused = await anyio.to_thread.run_sync(_status_of_sample, config)
                assert await anyio.to_thread.run_sync(sample.stop) == 0
                page = await anyio.to_thread.run_sync(sample.start)
                assert await chat.answered(page, "m3") == answer("m3")
                assert orch.process.poll() is None, orch.log()
    finally:
        model.released.set()
        sample.close()
    assert refused["state"] in ("backoff", "starting"), refused
    assert refused["last_error"].startswith(
        "the server refused the bearer token (HTTP 401, invalid_token); nexo read it from "
        f"servers.sample.token in {config}"
    ), refused
    assert chat.counts() == {"m1": 1, "m2": 1, "busy": 1, "m3": 1}


async def test_a_stdio_channel_server_stopped_while_idle_and_while_busy_never_stops_nexo(
    tmp_path: Path,
) -> None:
    model = BusyModel()
    chat = Conversation()
    stdio = {"transport": "stdio", "command": nexo_argv()[0], "args": ["-m", "channel_servers.sample"]}
    try:
        with FakeLLM(default=model) as llm:
            # Two crashes within stable_after_s open a stdio server's breaker: keep the default count.
            config = _config(tmp_path, llm, {**stdio, "env": page_env()}, supervision={})
            with running(config) as orch:

                async def restart(signum: signal.Signals) -> str:
                    mark = len(orch.lines)
                    (pid,) = child_pids(orch.process.pid, "channel_servers.sample")
                    os.kill(pid, signum)
                    await _wait_line(orch, "sample channel: open", mark)
                    return page_urls(orch.lines, mark)[-1]

                page = page_urls(orch.lines)[-1]
                assert await chat.answered(page, "m1") == answer("m1")

                page = await restart(signal.SIGTERM)
                assert await chat.answered(page, "m2") == answer("m2")

                await chat.say(page, "busy")
                assert await anyio.to_thread.run_sync(model.asked.wait, 60)
                page = await restart(signal.SIGTERM)
                model.released.set()
                assert await chat.collect(page, "busy") == answer("busy")

                page = await restart(signal.SIGKILL)
                assert await chat.answered(page, "m3") == answer("m3")
                assert orch.process.poll() is None, orch.log()
    finally:
        model.released.set()
    assert chat.counts() == {"m1": 1, "m2": 1, "busy": 1, "m3": 1}


async def test_nexo_started_before_its_http_server_says_it_waits_and_answers_once_it_is_up(
    tmp_path: Path,
) -> None:
    sample = HttpSample(free_port(), tmp_path / "sample-state")
    chat = Conversation()
    try:
        with FakeLLM(default=echo_model) as llm:
            config = _config(tmp_path, llm, http_sample_config(sample))
            with running(config, wait_ready=False) as orch:
                waiting = await _wait_line(orch, "waiting up to 30s for sample", 0)
                page = await anyio.to_thread.run_sync(sample.start)
                await anyio.to_thread.run_sync(lambda: orch.ready.wait(BACK_WITHIN_S))
                assert orch.ready.is_set(), orch.log()
                assert await chat.answered(page, "m1") == answer("m1")
    finally:
        sample.close()
    assert f"waiting up to 30s for sample at {sample.url} (ConnectError:" in orch.lines[waiting]
    assert SERVER_TOKEN not in orch.log()
    assert chat.counts() == {"m1": 1}
