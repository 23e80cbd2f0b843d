"""A simulated idle day of autonomy: what heartbeats and proactive ticks cost when nothing happens.

``python -m bench --only idle_day``. A real orchestrator runs in this process with the built-in
default servers (real processes over stdio) and a scripted model that answers every tick ``[idle]``.
The clock is accelerated: every wait of the tick loop moves a virtual clock instead of sleeping, so a
day of ticks takes seconds; limits, budgets and back-off all read that clock. Counted for the day:
model requests, tokens as a provider counts them (the system prompt, the messages and every tool
schema sent, about four characters a token, plus the answer) and messages delivered to anyone
(``channel out`` entries in the audit ledger).

Two settings, with heartbeat and proactive ticks on: the default intervals (heartbeat every 30 min,
ticks every 15 min backing off to 4 h) and the shortest the configuration accepts (heartbeat 60 s,
ticks 30 s) under the default 300 s cycle gap. Baseline: the same day with every tool schema sent
with every tick (``autonomy.tick_tools: ['*']``). Targets, at the default intervals: at most 50,000
tokens and no message a day.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from bench.mesh_run import workdir
from bench.stats import Result
from bench.support import describe, progress
from orchestrator.config.loading import load
from orchestrator.daemon.orchestrator import Orchestrator
from orchestrator.proactive.runtime import Autonomy
from shared.protocol.audit.methods import TailParams, TailRequest, TailResult
from shared.protocol.audit.terms import MAX_TAIL
from tests.fakes.llm import FakeLLM, RecordedRequest, Reply
from tests.mesh.harness import python_server, write_config

DEFAULT_MESH = {
    "console": "channel_servers.console",
    "time": "servers.time",
    "audit": "servers.audit",
    "memory": "servers.memory",
    "pairing": "servers.pairing",
    "cron": "servers.cron",
    "workspace": "servers.workspace",
}
"""The servers of the built-in defaults (orchestrator/defaults.yaml)."""
DEFAULT_INTERVALS: dict[str, Any] = {
    "heartbeat": {"enabled": True},
    "proactive": {"enabled": True},
}
SHORTEST_INTERVALS: dict[str, Any] = {
    "heartbeat": {"enabled": True, "interval_s": 60},
    "proactive": {"enabled": True, "tick_interval_secs": 30, "max_idle_secs": 30},
}
EVERY_TOOL = {"tick_tools": ["*"]}
TARGET_TOKENS = 50_000.0
TARGET_MESSAGES = 0.0
IDLE = "[idle]"
CHARS_PER_TOKEN = 4
DAY = timedelta(days=1)
READY_TIMEOUT_S = 60.0
DAY_TIMEOUT_S = 900.0
BASELINE = "the same day with every tool schema sent with every tick (tick_tools: ['*'])"


@dataclass(frozen=True, slots=True)
class Day:
    requests: int
    tokens: int
    messages: int


def provider_tokens(request: RecordedRequest, answer: str) -> int:
    """Tokens of one request and its answer as a provider bills them: the tool schemas included."""
    body = request.body
    sent = len(json.dumps(body.get("messages", []))) + len(json.dumps(body.get("tools", [])))
    if isinstance(body.get("system"), str | list):
        sent += len(json.dumps(body["system"]))
    return math.ceil(sent / CHARS_PER_TOKEN) + math.ceil(len(answer) / CHARS_PER_TOKEN)


class VirtualDay:
    """The tick loop's clock and sleep: waiting moves the clock; the day ends at midnight."""

    def __init__(self, start: datetime) -> None:
        self.now = start
        self.end = start + DAY
        self.go = anyio.Event()
        self.over = anyio.Event()

    def clock(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await self.go.wait()  # no tick before every server is connected
        if self.now + timedelta(seconds=seconds) >= self.end:
            self.over.set()
            await anyio.sleep_forever()
        self.now += timedelta(seconds=seconds)
        await anyio.lowlevel.checkpoint()


async def _deliveries(orch: Orchestrator, since: datetime) -> int:
    audit = orch.mesh.get(orch.config.audit.server)
    if audit is None:
        raise RuntimeError("the audit server is not configured: deliveries cannot be counted")
    delivered, after = 0, None
    while True:
        params = TailParams(since_at=since, since_seq=after, kinds=["channel"], limit=MAX_TAIL)
        found = await audit.request(TailRequest(params=params), TailResult, timeout=30)
        delivered += sum(1 for entry in found.entries if entry.body.get("direction") == "out")
        if len(found.entries) < MAX_TAIL:
            return delivered
        after = found.entries[-1].seq


async def _run_day(config_path: Path, llm: FakeLLM) -> Day:
    config = load(config_path)
    orch = Orchestrator(config, config_label=str(config_path))
    day = VirtualDay(datetime(2026, 11, 21, tzinfo=UTC))
    orch.autonomy = Autonomy(
        config, orch.mesh, orch.sink, clock=day.clock, sleep=day.sleep, rng=random.Random(7)
    )
    began = datetime.now(UTC)
    ready = anyio.Event()
    finished = anyio.Event()
    counted: list[int] = []

    async def on_ready(_: Orchestrator) -> None:
        ready.set()
        await finished.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: orch.run(on_ready=on_ready))
        with anyio.fail_after(READY_TIMEOUT_S):
            await ready.wait()
        day.go.set()
        try:
            with anyio.fail_after(DAY_TIMEOUT_S):
                await day.over.wait()
            await orch.sink.flush(30)
            counted.append(await _deliveries(orch, began))
        finally:
            finished.set()
    tokens = sum(provider_tokens(request, IDLE) for request in llm.requests)
    return Day(requests=len(llm.requests), tokens=tokens, messages=counted[0])


async def _day(directory: Path, label: str, agent: dict[str, Any], autonomy: dict[str, Any]) -> Day:
    with FakeLLM(default=Reply(IDLE)) as llm:
        config_path = write_config(
            directory / f"{label}.yaml",
            state_dir=directory / f"state-{label}",
            llm_base_url=llm.openai_base_url,
            servers={name: python_server(module) for name, module in DEFAULT_MESH.items()},
            agent=agent,
            extra={"autonomy": autonomy, "operator": {"channel": "console", "chat_id": "operator"}},
        )
        return await _run_day(config_path, llm)


def _rows(setting: str, ours: Day | None, base: Day | None, problem: str | None) -> list[Result]:
    default = setting == "default intervals"
    rows = [
        Result(f"idle day, {setting}: model requests", "/day", BASELINE),
        Result(
            f"idle day, {setting}: tokens", "tokens/day", BASELINE, target=TARGET_TOKENS if default else None
        ),
        Result(
            f"idle day, {setting}: messages", "/day", BASELINE, target=TARGET_MESSAGES if default else None
        ),
    ]
    for row, pick in zip(rows, (_requests, _tokens, _messages), strict=True):
        if problem is not None:
            row.errors.append(problem)
            continue
        if ours is not None:
            row.samples.append(pick(ours))
        if base is not None:
            row.baseline.append(pick(base))
    return rows


def _requests(day: Day) -> float:
    return float(day.requests)


def _tokens(day: Day) -> float:
    return float(day.tokens)


def _messages(day: Day) -> float:
    return float(day.messages)


async def _setting(directory: Path, setting: str, agent: dict[str, Any]) -> list[Result]:
    label = setting.replace(" ", "-")
    runs: dict[str, Callable[[], Awaitable[Day]]] = {
        "ours": lambda: _day(directory, f"{label}-ours", agent, {}),
        "baseline": lambda: _day(directory, f"{label}-baseline", agent, EVERY_TOOL),
    }
    days: dict[str, Day] = {}
    try:
        for name, run in runs.items():
            progress(f"idle day, {setting}: {name}")
            days[name] = await run()
    except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
        return _rows(setting, None, None, describe(exc))
    return _rows(setting, days["ours"], days["baseline"], None)


async def _measure(quick: bool) -> list[Result]:
    settings = [("default intervals", DEFAULT_INTERVALS)]
    if not quick:
        settings.append(("shortest intervals", SHORTEST_INTERVALS))
    results: list[Result] = []
    with workdir() as directory:
        for setting, agent in settings:
            results.extend(await _setting(directory, setting, agent))
    return results


def measure(quick: bool) -> list[Result]:
    return anyio.run(_measure, quick)
