"""The orchestrator's own time per turn: everything in a turn except waiting for the model.

Each goal is one tool turn (the scripted model asks for ``time__now``, the loop gates and runs it
over stdio) and one answer turn. ``TurnTiming.overhead_s`` of every turn is the measurement; the
model time of the same turns (``TurnTiming.model_s``, the scripted model's HTTP round trip) is the
baseline.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from bench.stats import Result
from bench.support import CHILD_ENV, FAST_SUPERVISION, connect, describe, progress
from orchestrator.config import Budgets
from orchestrator.llm import OpenAICompatProviderConfig, ToolResultMessage, build_provider
from orchestrator.loop import Decision, GoalResult, Outcome, ToolRunner, TurnTiming, run_goal
from orchestrator.mesh import CatalogTool, Mesh, StdioServerConfig
from tests.fakes.llm import CallTool, FakeLLM, Reply

TARGET_MS = 15.0
TOOL = "time__now"
SYSTEM = "You are a benchmark. Call the tool, then answer."
WARMUP_GOALS = 2


class AllowAll:
    """A gate that allows every call, so the figure is the loop's and not an approval's."""

    async def check(self, tool: CatalogTool, arguments: Mapping[str, Any], call_id: str) -> Decision:
        return Decision(True, "bench")


def _problem(goal: GoalResult) -> str | None:
    if goal.outcome is not Outcome.DONE or goal.tool_calls != 1:
        return f"goal did not run as scripted: {goal.summary()}"
    failed = [m.content for m in goal.transcript if isinstance(m, ToolResultMessage) and m.is_error]
    if failed:
        return f"{TOOL} failed inside the goal: {failed[0][:300]}"
    return None


async def _goals(n: int) -> tuple[list[list[TurnTiming]], str | None]:
    """The turn timings of ``n`` goals (after warm-up), or why they could not be taken."""
    script = [item for _ in range(n + WARMUP_GOALS) for item in (CallTool(TOOL, {}), Reply("Noted."))]
    config = StdioServerConfig(transport="stdio", command=sys.executable, args=["-m", "servers.time"])
    goals: list[list[TurnTiming]] = []
    async with (
        FakeLLM(script, default=Reply("Noted.")) as fake,
        Mesh({"time": config}, FAST_SUPERVISION, base_env=CHILD_ENV) as mesh,
    ):
        problem = await connect(mesh, "time")
        if problem is not None:
            return [], problem
        provider = build_provider(
            "fake",
            OpenAICompatProviderConfig(
                kind="openai_compat", base_url=fake.openai_base_url, model="m", max_retries=0
            ),
        )
        try:
            catalog, runner, gate, budgets = mesh.catalog(), ToolRunner(mesh), AllowAll(), Budgets()
            if catalog.get(TOOL) is None:
                return [], f"{TOOL} is not in the catalog: {catalog.names()}"
            for i in range(n + WARMUP_GOALS):
                goal = await run_goal(
                    provider=provider,
                    system=SYSTEM,
                    prompt=f"What time is it? ({i})",
                    catalog=catalog,
                    runner=runner,
                    gate=gate,
                    budgets=budgets,
                )
                problem = _problem(goal)
                if problem is not None:
                    return goals, problem
                if i >= WARMUP_GOALS:
                    goals.append(list(goal.timings))
        finally:
            await provider.aclose()
    return goals, None


def _fill(result: Result, turns: list[TurnTiming], problem: str | None) -> Result:
    result.samples = [t.overhead_s * 1000 for t in turns]
    result.baseline = [t.model_s * 1000 for t in turns]
    if problem is not None:
        result.errors.append(problem)
    return result


async def measure(quick: bool) -> list[Result]:
    n = 20 if quick else 50
    progress(f"turn overhead: {n} goals of a {TOOL} turn and an answer turn, time server over stdio")
    try:
        goals, problem = await _goals(n)
    except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
        goals, problem = [], describe(exc)
    baseline = "the model time of the same turns (TurnTiming.model_s)"
    every_turn = [turn for goal in goals for turn in goal]
    # Every turn but a goal's last one ran a tool: the loop's heaviest path.
    tool_turns = [turn for goal in goals for turn in goal[:-1]]
    return [
        _fill(Result("turn overhead, all turns", "ms", baseline, target=TARGET_MS), every_turn, problem),
        _fill(Result("turn overhead, tool turns", "ms", baseline, target=TARGET_MS), tool_turns, problem),
    ]
