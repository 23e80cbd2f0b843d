"""One agent's autonomous timeline on a virtual clock: the real tick loop and action limiter, with a
scripted tick in place of a model turn."""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
import yaml

from orchestrator.config.loading import load
from orchestrator.goals import AuditSink
from orchestrator.mesh import Mesh
from orchestrator.proactive.config import HeartbeatConfig, Limits, ProactiveConfig
from orchestrator.proactive.limits import ActionLimiter
from orchestrator.proactive.plan import TickPlan, run_plan, start_refusal, timing_problems
from orchestrator.proactive.runtime import Autonomy
from orchestrator.proactive.ticks import TickReason

pytestmark = pytest.mark.anyio
START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


@dataclass
class Report:
    ended: str = "idle"
    sleep_ms: int | None = None
    sleep_reason: str = ""


class Stop(Exception):
    """Ends the simulated run."""


@dataclass
class Timeline:
    """Virtual time: sleeping advances the clock at once."""

    now: datetime = START
    ticks: list[tuple[TickReason, datetime]] = field(default_factory=list)

    def clock(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        await anyio.lowlevel.checkpoint()

    def offsets(self, reason: TickReason) -> list[float]:
        return [(at - START).total_seconds() for kind, at in self.ticks if kind == reason]


async def simulate(
    *,
    heartbeat: dict[str, object] | None = None,
    proactive: dict[str, object] | None = None,
    gap_s: float = 300,
    hours: float = 2,
    answer: Callable[[TickReason, int], Report] = lambda reason, n: Report(),
) -> Timeline:
    timeline = Timeline()
    limiter = ActionLimiter(Limits(min_cycle_gap_s=gap_s), clock=timeline.clock)
    plan = TickPlan(
        HeartbeatConfig.model_validate({"enabled": heartbeat is not None, **(heartbeat or {})}),
        ProactiveConfig.model_validate(
            {"enabled": proactive is not None, "jitter_pct": 0, **(proactive or {})}
        ),
        start=START,
        rng=random.Random(1),
    )
    end = START + timedelta(hours=hours)

    async def tick(reason: TickReason) -> Report:
        if timeline.now >= end:
            raise Stop
        limiter.start_cycle()
        timeline.ticks.append((reason, timeline.now))
        return answer(reason, len(timeline.ticks))

    async def ready() -> None:
        await anyio.lowlevel.checkpoint()

    with pytest.raises(Stop):
        await run_plan(
            plan,
            clock=timeline.clock,
            sleep=timeline.sleep,
            ready=ready,
            refusal=lambda reason: start_refusal(limiter, reason),
            tick=tick,
        )
    return timeline


async def test_a_wake_the_agent_asked_for_comes_at_its_time_despite_the_cycle_gap() -> None:
    def answer(reason: TickReason, n: int) -> Report:
        return Report("answered", sleep_ms=60_000) if n == 1 else Report()

    timeline = await simulate(proactive={"tick_interval_secs": 900}, answer=answer, hours=0.5)
    assert timeline.ticks[:2] == [
        ("proactive", START + timedelta(seconds=900)),
        ("wake", START + timedelta(seconds=960)),
    ]


def test_a_sleep_schedules_a_wake_that_carries_what_the_agent_waits_for() -> None:
    plan = TickPlan(
        HeartbeatConfig(enabled=True, interval_s=1800),
        ProactiveConfig(enabled=True, tick_interval_secs=900, jitter_pct=0),
        start=START,
        rng=random.Random(1),
    )
    plan.ran("heartbeat", START + timedelta(seconds=1800), Report("answered", 120_000, "the build"))
    assert plan.next() == ("wake", START + timedelta(seconds=1920))
    assert plan.wake_note == "the build"
    assert "proactive" not in plan.due  # a sleep pauses proactive ticks until the wake


async def test_a_tick_refused_by_the_cycle_gap_waits_for_it_without_backing_off() -> None:
    # A heartbeat due 100 s after a tick runs when the gap ends and keeps its own interval; the
    # proactive ticks stay at 900 s (max_idle_secs 900: no back-off to hide a doubling).
    timeline = await simulate(
        heartbeat={"interval_s": 1000},
        proactive={"tick_interval_secs": 900, "max_idle_secs": 900},
        hours=1,
    )
    assert timeline.ticks == [
        ("proactive", START + timedelta(seconds=900)),
        ("heartbeat", START + timedelta(seconds=1200)),
        ("proactive", START + timedelta(seconds=1800)),
        ("heartbeat", START + timedelta(seconds=2100)),
        ("proactive", START + timedelta(seconds=2700)),
        ("heartbeat", START + timedelta(seconds=3000)),
    ]


async def test_heartbeats_at_the_cycle_gap_do_not_starve_proactive_ticks() -> None:
    timeline = await simulate(
        heartbeat={"interval_s": 300},
        proactive={"tick_interval_secs": 600, "max_idle_secs": 600},
        hours=2,
    )
    # Every tick takes one 300 s slot; the proactive tick, due 600 s after the last, gets every third.
    assert timeline.offsets("proactive") == [900, 1800, 2700, 3600, 4500, 5400, 6300]
    starts = sorted(at for _, at in timeline.ticks)
    assert all(b - a >= timedelta(seconds=300) for a, b in itertools.pairwise(starts))


async def test_idle_proactive_ticks_back_off_by_doubling() -> None:
    timeline = await simulate(proactive={"tick_interval_secs": 600, "max_idle_secs": 4800}, hours=6)
    assert timeline.offsets("proactive")[:4] == [600, 1800, 4200, 9000]


async def test_heartbeats_keep_their_interval_when_it_is_at_least_the_gap() -> None:
    timeline = await simulate(heartbeat={"interval_s": 600}, hours=1)
    assert timeline.offsets("heartbeat") == [600, 1200, 1800, 2400, 3000]


def test_intervals_the_cycle_gap_makes_impossible_are_named_with_both_settings_and_the_fix() -> None:
    problems = timing_problems(
        "main",
        HeartbeatConfig(enabled=True, interval_s=60),
        ProactiveConfig(enabled=True, tick_interval_secs=120),
        Limits(min_cycle_gap_s=300),
    )
    assert problems == [
        "agents.main.heartbeat.interval_s (60 s) is shorter than autonomy.limits.min_cycle_gap_s (300 s): "
        "heartbeats would run every 300 s. Fix: raise interval_s to at least 300 or lower min_cycle_gap_s "
        "to 60 or less",
        "agents.main.proactive.tick_interval_secs (120 s) is shorter than autonomy.limits.min_cycle_gap_s "
        "(300 s): ticks would come every 300 s at best. Fix: raise tick_interval_secs to at least 300 or "
        "lower min_cycle_gap_s to 120 or less",
    ]


def test_a_heartbeat_and_ticks_that_together_need_more_cycles_than_the_gap_allows_are_named() -> None:
    problems = timing_problems(
        "main",
        HeartbeatConfig(enabled=True, interval_s=400),
        ProactiveConfig(enabled=True, tick_interval_secs=600),
        Limits(min_cycle_gap_s=300),
    )
    assert problems == [
        "agents.main: a heartbeat every 400 s and a proactive tick every 600 s need cycles closer together "
        "than autonomy.limits.min_cycle_gap_s (300 s) allows, so both run late. Fix: lower min_cycle_gap_s "
        "to 240 or less, or lengthen heartbeat.interval_s or proactive.tick_interval_secs"
    ]


def test_the_default_intervals_fit_the_default_gap() -> None:
    assert (
        timing_problems("main", HeartbeatConfig(enabled=True), ProactiveConfig(enabled=True), Limits()) == []
    )


async def test_autonomy_names_impossible_intervals_in_one_log_line_when_it_starts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "agents.yaml"
    provider = {"kind": "openai_compat", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    agent = {"id": "nexo", "model": {"provider": "local"}, "heartbeat": {"enabled": True, "interval_s": 60}}
    path.write_text(
        yaml.safe_dump(
            {
                "state_dir": str(tmp_path / "state"),
                "servers": {},
                "llm": {"providers": {"local": provider}},
                "agents": [agent],
            }
        )
    )
    config = load(path)
    with caplog.at_level(logging.WARNING, logger="nexo.autonomy"):
        await Autonomy(config, Mesh({}), AuditSink(None)).run([])
    assert [record.getMessage() for record in caplog.records] == [
        "agents.nexo.heartbeat.interval_s (60 s) is shorter than autonomy.limits.min_cycle_gap_s (300 s): "
        "heartbeats would run every 300 s. Fix: raise interval_s to at least 300 or lower min_cycle_gap_s "
        "to 60 or less"
    ]
