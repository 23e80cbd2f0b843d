"""Autonomy in a real orchestrator (in this process) with real servers and a fake model: budgets over
a simulated day, idle ticks that say nothing, the per-hour cap told once, preemption, the kill switch."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.proactive.ticks import ProactiveSchedule
from orchestrator.tools.local import GoalContext, LocalTool
from shared.protocol.audit.bodies import NoticeBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.audit.goals import Origin
from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, Step, tokens_for
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.inbox import replies, say
from tests.orchestrator.autonomy_support import DAY_START, Clock, autonomy_config, running

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]


def _input_tokens(requests: list[RecordedRequest]) -> int:
    return sum(tokens_for(r.input_chars) for r in requests)


async def test_an_idle_day_of_ticks_stays_within_budget_and_says_nothing(
    tmp_path: Path,
) -> None:
    budget = 6_000
    with FakeLLM(default=ModelReply("[idle]")) as llm:
        config = autonomy_config(
            tmp_path,
            llm.openai_base_url,
            agent={
                "model": {"provider": "fake", "max_tokens": 100},
                "heartbeat": {"enabled": True, "interval_s": 1800},
                "proactive": {"enabled": True, "tick_interval_secs": 900, "max_idle_secs": 7200},
            },
            autonomy={"budgets": {"per_day": {"tokens": budget}}, "limits": {"min_cycle_gap_s": 300}},
        )
        clock = Clock()
        async with running(config, clock) as orch:
            intake = orch.intakes[0]
            autonomy = orch.autonomy
            autonomy.intakes = {intake.agent.id: intake}
            schedule = ProactiveSchedule(intake.agent.proactive, rng=random.Random(5))
            heartbeats = [DAY_START + timedelta(seconds=1800 * n) for n in range(1, 48)]
            proactive, at, idle = [], DAY_START, False
            while True:
                at += timedelta(seconds=schedule.next_delay(idle=idle))
                if at >= DAY_START + timedelta(days=1):
                    break
                proactive.append(at)
                idle = True
            outcomes: list[str] = []
            plan = sorted([(t, "heartbeat") for t in heartbeats] + [(t, "proactive") for t in proactive])
            for moment, reason in plan:
                clock.now = moment
                prompt = intake.agent.heartbeat.prompt if reason == "heartbeat" else None
                report = await autonomy.tick(
                    intake, "heartbeat" if reason == "heartbeat" else "proactive", prompt
                )
                outcomes.append("skipped" if report is None else report.ended)
            spent = autonomy.spend.day_spent()
        sent = replies(tmp_path)
    assert outcomes.count("idle") >= 10
    assert "budget" in outcomes  # the budget, not the schedule, ended the day's work
    assert spent.tokens <= budget
    assert spent.input_tokens == _input_tokens(llm.requests)
    assert [m for m in sent if "[limit]" not in m.get("text", "")] == []  # idle ticks tell nobody
    assert len([m for m in sent if "[limit]" in m.get("text", "")]) == 1  # the budget hit, once


def _busy_model(request: RecordedRequest) -> Step:
    """A model that never stops acting: every answer is another tool call."""
    return Step(tool_calls=(CallTool("channel_list", {}),))


async def test_the_hourly_action_cap_pauses_work_without_model_calls_and_tells_the_operator_once(
    tmp_path: Path,
) -> None:
    with FakeLLM(default=_busy_model) as llm:
        config = autonomy_config(
            tmp_path,
            llm.openai_base_url,
            agent={"budgets": {"max_turns": 30, "max_consecutive_tool_failures": 50}},
            autonomy={
                "limits": {"max_actions_per_cycle": 20, "max_actions_per_hour": 25, "min_cycle_gap_s": 60}
            },
        )
        clock = Clock()
        async with running(config, clock) as orch:
            intake = orch.intakes[0]
            autonomy = orch.autonomy
            autonomy.intakes = {intake.agent.id: intake}
            reports = []
            for minute in (0, 2, 4, 6):
                clock.now = DAY_START + timedelta(minutes=minute)
                reports.append(await autonomy.tick(intake, "proactive", None))
        sent = replies(tmp_path)
    assert [r.ended if r is not None else None for r in reports] == ["limit", "limit", None, None]
    axes = [r.limit.axis for r in reports if r is not None and r.limit is not None]
    assert axes == ["actions_per_cycle", "actions_per_hour"]
    # The first cycle makes 21 calls (its 21st action is refused by the cycle cap); the second makes
    # 5, whose 5 actions fill the hour, and no sixth: the cap is checked before the call. While it
    # holds, the next cycles do not start and pay for no model call.
    assert len(llm.requests) == 26
    results = sum(1 for r in llm.requests if r.body["messages"][-1]["role"] == "tool")
    assert results == 20 + 4  # the results of the 25 allowed actions, but the last one's, were sent on
    limits = [m["text"] for m in sent if m.get("text", "").startswith("[limit]")]
    assert len(limits) == 2  # one notice per limit, however often it is hit


async def test_user_messages_come_first_a_cycle_waits_and_yields_to_them(tmp_path: Path) -> None:
    prompts: list[str] = []

    def model(request: RecordedRequest) -> ModelReply | Step:
        prompts.append(request.last_user_text or "")
        if request.body["messages"][-1]["role"] == "tool":
            return Step(tool_calls=(CallTool("probe", {}),))
        return Step(tool_calls=(CallTool("probe", {}),))

    with FakeLLM(default=model) as llm:
        config = autonomy_config(tmp_path, llm.openai_base_url, agent={}, autonomy={})
        clock = Clock()
        async with running(config, clock) as orch:
            intake = orch.intakes[0]
            autonomy = orch.autonomy
            autonomy.intakes = {intake.agent.id: intake}
            calls: list[int] = []

            async def probe(_: GoalContext, __: Any) -> str:
                calls.append(1)
                intake.in_flight.begin(("inbox", "user-message"))  # a user message arrives mid-cycle
                return "ok"

            intake.local.tools["probe"] = LocalTool(
                "probe", "probe", {"type": "object"}, probe, read_only=True
            )
            # A user message in flight: the cycle does not start until it is answered.
            intake.in_flight.begin(("inbox", "earlier"))
            reports: list[Any] = []
            async with anyio.create_task_group() as tg:

                async def cycle() -> None:
                    reports.append(await autonomy.tick(intake, "proactive", None))

                tg.start_soon(cycle)
                await anyio.wait_all_tasks_blocked()
                assert prompts == []  # waiting for the user's message to be handled
                intake.in_flight.end(("inbox", "earlier"))
            # Mid-cycle, the probe tool made a user message arrive: the next model call did not happen.
            intake.in_flight.end(("inbox", "user-message"))
    assert len(calls) == 1
    assert len(prompts) == 1
    assert reports[0].ended == "preempted"


async def test_after_a_long_silence_the_operator_first_gets_a_digest(tmp_path: Path) -> None:
    with FakeLLM(default=ModelReply("answer")) as llm:
        config = autonomy_config(
            tmp_path, llm.openai_base_url, agent={}, autonomy={"return_digest_after_s": 43200}
        )
        async with running(config, Clock()) as orch:
            intake = orch.intakes[0]
            now = [datetime.now(UTC)]
            intake.away._clock = lambda: now[0]
            answered = anyio.Event()

            async def until(count: int) -> None:
                with anyio.fail_after(30):
                    while intake.handled < count:
                        await answered.wait()

            original = orch.goals.finish

            async def finish(*args: Any, **kwargs: Any) -> None:
                await original(*args, **kwargs)
                answered.set()

            orch.goals.finish = finish  # type: ignore[method-assign]
            await say(tmp_path, "m1", "good evening")
            await until(1)
            orch.autonomy.intakes = {intake.agent.id: intake}
            heartbeat = await orch.autonomy.tick(intake, "heartbeat", intake.agent.heartbeat.prompt)
            await orch.autonomy.limit_notice(
                "nexo", "day_tokens", "proactive: today's budget is spent", source="proactive"
            )
            for n in range(1_100):  # more than one page of the ledger: the digest reads them all
                orch.sink.record(
                    EntryDraft.of(
                        NoticeBody(level="info", message=f"n{n}"), source="orchestrator", subject="n"
                    )
                )
            await orch.sink.flush(30)
            now[0] += timedelta(hours=13)
            await say(tmp_path, "m2", "morning! anything new?")
            await until(2)
    texts = [m.get("text", "") for m in replies(tmp_path)]
    [beat] = [r for r in llm.requests if 'reason="heartbeat"' in (r.last_user_text or "")]
    # The tick says the agent may call sleep: it is offered; every other tool loads on demand.
    assert sorted(beat.tool_names) == ["load_tools", "sleep"]
    assert heartbeat is not None
    assert heartbeat.ended == "answered"
    assert texts[:3] == ["answer", "answer", "[limit] proactive: today's budget is spent"]
    digest = texts[-2].splitlines()
    assert digest[0].startswith("While you were away")
    # The heartbeat's answer and the [limit] notice; not the operator's own message or its reply.
    assert "- Messages: inbox 0 in, 2 out" in digest
    assert "- Limits hit: 1 (day_tokens ×1)" in digest
    assert texts[-1] == "answer"


async def test_a_cycle_that_fails_is_recorded_and_autonomy_goes_on(tmp_path: Path) -> None:
    with FakeLLM(default=ModelReply("[idle]")) as llm:
        config = autonomy_config(
            tmp_path, llm.openai_base_url, agent={}, autonomy={"limits": {"min_cycle_gap_s": 60}}
        )
        clock = Clock()
        async with running(config, clock) as orch:
            intake = orch.intakes[0]
            autonomy = orch.autonomy
            working = intake.catalog

            def broken() -> Any:
                raise RuntimeError("catalog unavailable")

            intake.catalog = broken  # type: ignore[method-assign]
            failed = await autonomy.safe_tick(intake, "proactive", None)
            intake.catalog = working  # type: ignore[method-assign]
            clock.now += timedelta(minutes=2)
            # Pending work the next tick is told about: a background run and why the agent slept.
            await orch.goals.start(
                agent="nexo",
                kind="bg",
                origin=Origin(source="cli"),
                prompt="sort the inbox",
                goal_id="g-bg-1",
            )
            recovered = await autonomy.safe_tick(intake, "wake", None, wake_note="the nightly build")
    assert failed is None
    assert recovered is not None
    assert recovered.ended == "idle"
    tick = (llm.requests[-1].last_user_text or "").splitlines()
    assert 'reason="wake"' in tick[0]
    assert tick[1:4] == [
        "Pending:",
        "- you asked to be woken now: the nightly build",
        "- goal g-bg-1 (bg, running): sort the inbox",
    ]
