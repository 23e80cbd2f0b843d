"""Autonomy across crashes and restarts, in a real orchestrator (this process) with real audit and
inbox servers and a fake model that reports usage like a provider: budgets are never overrun however
a crash lands, and unattended work a crash cut short is recorded, counted and never replayed."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.daemon.orchestrator import Orchestrator
from orchestrator.intake import Intake
from orchestrator.proactive.runtime import Autonomy
from orchestrator.tools.local import GoalContext, LocalTool
from shared.protocol.audit.goals import Origin
from shared.protocol.audit.methods import (
    GoalCreateParams,
    GoalCreateRequest,
    GoalCreateResult,
    GoalGetParams,
    GoalGetRequest,
    GoalGetResult,
    TailParams,
    TailRequest,
    TailResult,
)
from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, Step
from tests.orchestrator.autonomy_support import autonomy_config, running

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]

CRASH_POINTS = 100
ENTRY_BUDGET = 9_000
DAY_BUDGET = 700_000


def _midday_zone(now: datetime) -> str:
    """A fixed-offset zone where ``now`` is noon, so no test run straddles the budget day's midnight."""
    offset = (12 - now.hour + 12) % 24 - 12
    return "UTC" if offset == 0 else f"Etc/GMT{'-' if offset > 0 else '+'}{abs(offset)}"


def _working_model(request: RecordedRequest) -> Step:
    """A model that keeps working: every answer is one more call of the ``work`` tool."""
    return Step(tool_calls=(CallTool("work", {"step": len(request.body["messages"])}),))


def _work_tool(crash: dict[str, Any]) -> LocalTool:
    """A tool whose result grows the conversation; at the seeded call it crashes the turn."""

    async def work(_: GoalContext, __: Any) -> str:
        crash["calls"] += 1
        if crash["calls"] == crash["at"]:
            crash["scope"].cancel()
            await anyio.lowlevel.checkpoint()
        return "worked: " + "x" * 300

    return LocalTool("work", "does one step of the scheduled work", {"type": "object"}, work, read_only=True)


async def _restarted(orch: Orchestrator, intake: Intake) -> Autonomy:
    """A fresh autonomy state, rebuilt from the ledger as a new process would build it."""
    autonomy = Autonomy(orch.config, orch.mesh, orch.sink, clock=lambda: datetime.now(UTC))
    await autonomy.restore()
    autonomy.intakes = {intake.agent.id: intake}
    return autonomy


async def test_spend_budgets_hold_across_a_hundred_seeded_crash_and_restart_points(tmp_path: Path) -> None:
    with FakeLLM(default=_working_model, bill_tools=True) as llm:
        config = autonomy_config(
            tmp_path,
            llm.openai_base_url,
            agent={
                "model": {"provider": "fake", "max_tokens": 50},
                "budgets": {"max_turns": 50, "max_consecutive_tool_failures": 50},
            },
            autonomy={
                "budgets": {
                    "per_day": {"tokens": DAY_BUDGET},
                    "per_cron_entry": {"tokens": ENTRY_BUDGET},
                },
                "limits": {"max_actions_per_hour": 100_000, "min_cycle_gap_s": 0},
                "day_timezone": _midday_zone(datetime.now(UTC)),
            },
        )
        async with running(config, lambda: datetime.now(UTC)) as orch:
            intake = orch.intakes[0]
            crash: dict[str, Any] = {"calls": 0, "at": 0, "scope": anyio.CancelScope()}
            intake.local.tools["work"] = _work_tool(crash)
            rng = random.Random(20261126)
            per_entry: list[int] = []
            ended: list[str] = []
            autonomy = await _restarted(orch, intake)
            for point in range(CRASH_POINTS):
                entry = f"entry-{point}"
                billed_before = llm.billed_tokens
                crash.update(calls=0, at=rng.randint(1, 3))
                for fire in range(5):
                    with anyio.CancelScope() as scope:
                        crash["scope"] = scope
                        report = await autonomy.run_fire_turn(
                            intake,
                            f"[scheduled] run {entry}",
                            goal_id=f"cron-{point}-{fire}-1",
                            entry_id=entry,
                            source=f"cron:{entry}",
                        )
                    if scope.cancelled_caught:
                        autonomy = await _restarted(orch, intake)
                    elif report.ended == "budget":
                        ended.append(report.reason)
                        break
                per_entry.append(llm.billed_tokens - billed_before)
            day = llm.billed_tokens
    assert len(per_entry) == CRASH_POINTS
    assert max(per_entry) <= ENTRY_BUDGET, "a cron entry overran its budget"
    assert day <= DAY_BUDGET, "the day overran its budget"
    assert len(ended) == CRASH_POINTS  # every entry ran until a budget stopped it
    assert "day_tokens" in ended  # the day's budget was reached
    assert "cron_entry_tokens" in ended  # and, before it, the entries' own budgets


def _fill_the_hour(crash: dict[str, Any]) -> LocalTool:
    async def act(_: GoalContext, __: Any) -> str:
        crash["calls"] += 1
        return "done"

    return LocalTool("act", "one action", {"type": "object"}, act, read_only=True)


async def _left_running(orch: Orchestrator, goal_id: str, source: str) -> None:
    """A daemon goal as a crashed process leaves it in the registry: running, never finished."""
    audit = orch.mesh["audit"]
    await audit.request(
        GoalCreateRequest(
            params=GoalCreateParams(
                id=goal_id, agent="nexo", kind="daemon", origin=Origin(source=source), prompt="<tick>"
            )
        ),
        GoalCreateResult,
        timeout=10,
    )


async def test_unattended_goals_cut_short_are_recorded_not_replayed_and_limits_survive_the_restart(
    tmp_path: Path,
) -> None:
    sources = ["heartbeat", "proactive", "cron:entry-a", "cron:entry-b", "heartbeat", "proactive"]
    crash = {"calls": 0}
    with FakeLLM(default=Step(tool_calls=(CallTool("act", {}),))) as llm:
        config = autonomy_config(
            tmp_path,
            llm.openai_base_url,
            agent={"model": {"provider": "fake", "max_tokens": 50}},
            autonomy={
                "limits": {"max_actions_per_cycle": 5, "max_actions_per_hour": 5, "min_cycle_gap_s": 0},
                "budgets": {"per_day": {"tokens": 1_000_000, "usd": 5.0}},
                "prices": {"scripted": {"input_per_mtok": 3.0, "output_per_mtok": 15.0}},
            },
        )
        async with running(config, lambda: datetime.now(UTC)) as orch:
            intake = orch.intakes[0]
            intake.local.tools["act"] = _fill_the_hour(crash)
            first = await orch.autonomy.tick(intake, "proactive", None)
            for n, source in enumerate(sources):
                await _left_running(orch, f"crashed-{n}", source)
            orch.autonomy.pause("cli")  # the operator paused autonomy before the restart
        calls_before_restart = len(llm.requests)
        async with running(config, lambda: datetime.now(UTC)) as orch:
            intake = orch.intakes[0]
            intake.local.tools["act"] = _fill_the_hour(crash)
            orch.autonomy.resume("cli")
            after_restart = await orch.autonomy.tick(intake, "heartbeat", "check")
            status = orch.autonomy.status()
            audit = orch.mesh["audit"]
            goals = [
                await audit.request(
                    GoalGetRequest(params=GoalGetParams(id=f"crashed-{n}")), GoalGetResult, timeout=10
                )
                for n in range(len(sources))
            ]
            await orch.sink.flush(5)
            notices = await audit.request(
                TailRequest(params=TailParams(kind="notice", limit=100)), TailResult, timeout=10
            )
            metrics = orch.metrics.summary()
    assert first is not None
    assert first.ended == "limit"  # five actions filled the hour
    assert crash["calls"] == 5
    assert len(llm.requests) == calls_before_restart  # nothing replayed, no model call while the cap holds
    assert after_restart is None
    assert [g.goal.status if g.goal else None for g in goals] == ["lost_on_restart"] * len(sources)
    interrupted = [e for e in notices.entries if e.subject == "goal interrupted"]
    assert sorted(e.goal_id or "" for e in interrupted) == [f"crashed-{n}" for n in range(len(sources))]
    assert all("not resumed" in e.body["message"] for e in interrupted)
    assert status["interrupted_at_start"] == len(sources)
    assert status["agents"]["nexo"]["actions_last_hour"] == 5
    assert status["agents"]["nexo"]["model"] == "fake/scripted"
    assert status["agents"]["nexo"]["price"]["key"] == "scripted"
    counted = {row["source"]: row["value"] for row in metrics.get("nexo_unattended_interrupted", [])}
    assert counted == {"heartbeat": 2.0, "proactive": 2.0, "cron": 2.0}
