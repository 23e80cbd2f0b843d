"""The goal registry: admission, lifecycle, promotion from the queue, the boot sweep."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from servers.audit.errors import GoalNotFound, InvalidRequest, TransitionRefused
from servers.audit.goals import PROMPT_MAX, GoalRegistry, stored_prompt
from shared.protocol.audit.goals import Budget, Goal, Origin
from shared.protocol.audit.terms import GoalKind
from tests.servers.audit.conftest import START, ManualClock, opened_ledger

pytestmark = pytest.mark.anyio

CHAT = Origin(source="channel:console", session_key="console:operator", chat_id="operator")


def ids() -> Iterator[str]:
    n = 0
    while True:
        n += 1
        yield f"g-{n}"


@asynccontextmanager
async def registry(tmp_path: Path, max_running: int = 2) -> AsyncIterator[GoalRegistry]:
    counter = ids()
    async with opened_ledger(tmp_path / "audit.db", ManualClock()) as ledger:
        yield GoalRegistry(ledger, max_running=max_running, new_id=lambda: next(counter))


async def create(goals: GoalRegistry, kind: GoalKind = "bg", prompt: str = "water the plants") -> Goal:
    goal, _ = await goals.create(agent="nexo", kind=kind, origin=CHAT, prompt=prompt)
    return goal


async def history(goals: GoalRegistry) -> list[tuple[str | None, str, str | None, str, str]]:
    """Every goal ledger entry as (goal, source, previous, status, reason)."""
    entries = await goals.ledger.tail(kind="goal", limit=1000)
    return [(e.goal_id, e.source, e.body["previous"], e.body["status"], e.body["reason"]) for e in entries]


async def test_goals_run_until_the_cap_then_queue(tmp_path: Path) -> None:
    async with registry(tmp_path) as goals:
        statuses = [(await create(goals)).status for _ in range(3)]
        first = await goals.get("g-1")
    assert statuses == ["running", "running", "queued"]
    at = START.isoformat(timespec="microseconds")
    assert first == Goal(
        id="g-1",
        agent="nexo",
        kind="bg",
        status="running",
        origin=CHAT,
        prompt="water the plants",
        phase="",
        created_at=at,
        started_at=at,
        finished_at=None,
        last_decision="",
        last_event="",
        budget=Budget(),
        outcome="",
        notified=False,
    )


async def test_creating_an_existing_id_returns_it_unchanged(tmp_path: Path) -> None:
    async with registry(tmp_path) as goals:
        made, created = await goals.create(
            agent="nexo", kind="daemon", origin=CHAT, prompt="a", goal_id="mine"
        )
        again, created_again = await goals.create(
            agent="nexo", kind="bg", origin=CHAT, prompt="b", goal_id="mine"
        )
        entries = await history(goals)
    assert (created, created_again, again) == (True, False, made)
    assert entries == [("mine", "orchestrator", None, "running", "created")]


def test_the_whole_prompt_is_kept_for_resuming_and_capped() -> None:
    assert stored_prompt("\n  check the mail  \nthen reply to Bob") == "check the mail  \nthen reply to Bob"
    assert stored_prompt("x" * (PROMPT_MAX + 5)) == "x" * (PROMPT_MAX - 1) + "…"
    assert stored_prompt("") == ""


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"goal_id": "bad id"}, "goal id 'bad id' is invalid"),
        ({"agent": "Nexo"}, "agent 'Nexo' is not an agent id"),
        ({"source": "not a source"}, "source 'not a source' is not a source name"),
        ({"origin": Origin(source="??")}, "origin.source '??' is not a source name"),
    ],
)
async def test_a_goal_with_a_bad_field_is_refused(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    arguments: dict[str, object] = {"agent": "nexo", "kind": "bg", "origin": CHAT, "prompt": "p", **kwargs}
    async with registry(tmp_path) as goals:
        with pytest.raises(InvalidRequest, match=re.escape(message)):
            await goals.create(**arguments)  # type: ignore[arg-type]


async def test_a_goal_that_finishes_no_longer_has_a_phase(tmp_path: Path) -> None:
    async with registry(tmp_path) as goals:
        await create(goals)
        working, _ = await goals.update("g-1", phase="running")
        done, _ = await goals.update("g-1", status="done", outcome="watered")
        stored = await goals.get("g-1")
    assert (working.phase, done.phase, stored.phase) == ("running", "", "")


async def test_updates_set_fields_and_record_every_status_change(tmp_path: Path) -> None:
    async with registry(tmp_path) as goals:
        await create(goals)
        budget = Budget(turns=3, tokens=1200, cost_usd=0.01, wall_s=4.5)
        await goals.update("g-1", phase="searching", last_decision="look it up", budget=budget)
        slept, _ = await goals.update("g-1", status="sleeping", reason="until 09:00", last_event="tick")
        done, promoted = await goals.update("g-1", status="done", outcome="watered", source="heartbeat")
        entries = await history(goals)
    assert (slept.status, slept.last_event, slept.phase, slept.budget) == (
        "sleeping",
        "tick",
        "searching",
        budget,
    )
    assert (done.status, done.outcome, done.finished_at is not None, promoted) == (
        "done",
        "watered",
        True,
        [],
    )
    assert entries == [
        ("g-1", "orchestrator", None, "running", "created"),
        ("g-1", "orchestrator", "running", "sleeping", "until 09:00"),
        ("g-1", "heartbeat", "sleeping", "done", ""),
    ]


async def test_a_terminal_goal_cannot_change_status_but_repeating_it_is_harmless(tmp_path: Path) -> None:
    async with registry(tmp_path) as goals:
        await create(goals)
        await goals.update("g-1", status="cancelled")
        repeated, _ = await goals.update("g-1", status="cancelled")
        with pytest.raises(TransitionRefused) as caught:
            await goals.update("g-1", status="running")
        entries = await history(goals)
    assert repeated.status == "cancelled"
    assert (
        str(caught.value)
        == "goal 'g-1' is cancelled; it cannot become 'running' (allowed: none: it is final)"
    )
    assert len(entries) == 2


async def test_a_refused_transition_names_the_allowed_ones_and_changes_nothing(tmp_path: Path) -> None:
    async with registry(tmp_path) as goals:
        await create(goals)
        with pytest.raises(
            TransitionRefused, match=r"allowed: cancelled, done, failed, lost_on_restart, paused"
        ):
            await goals.update("g-1", status="queued", phase="should not stick")
        goal = await goals.get("g-1")
    assert (goal.status, goal.phase) == ("running", "")


async def test_finishing_a_running_goal_starts_the_oldest_queued_one(tmp_path: Path) -> None:
    async with registry(tmp_path, max_running=1) as goals:
        for _ in range(3):
            await create(goals)
        _, promoted = await goals.update("g-1", status="failed", outcome="boom")
        entries = await history(goals)
    assert [(g.id, g.status) for g in promoted] == [("g-2", "running")]
    assert entries[-1] == ("g-2", "audit", "queued", "running", "a running slot became free")


async def test_asking_to_run_without_a_free_slot_queues_the_goal(tmp_path: Path) -> None:
    async with registry(tmp_path, max_running=1) as goals:
        await create(goals)
        await create(goals)
        await goals.update("g-1", status="paused")
        resumed_while_full, _ = await goals.update("g-1", status="running")
        still_queued, _ = await goals.update("g-1", status="running")
        _, promoted = await goals.update("g-2", status="done")
    assert (resumed_while_full.status, still_queued.status) == ("queued", "queued")
    assert [g.id for g in promoted] == ["g-1"]


async def test_the_boot_sweep_marks_unresumable_live_goals_lost_and_reports_them_until_notified(
    tmp_path: Path,
) -> None:
    async with registry(tmp_path, max_running=5) as goals:
        chat = await create(goals, kind="interactive")
        daemon = await create(goals, kind="daemon")
        await create(goals, kind="interactive")
        finished = await create(goals, kind="bg")
        await goals.update(finished.id, status="done")
        lost, resumable, promoted = await goals.boot(["daemon", "bg"])
        lost_again, _, _ = await goals.boot(["daemon", "bg"])
        marked = await goals.mark_notified([chat.id, daemon.id, "g-3"])
        after, _, _ = await goals.boot(["daemon", "bg"])
        told = await goals.get(chat.id)
    assert [(g.id, g.status, g.origin) for g in lost] == [
        ("g-1", "lost_on_restart", CHAT),
        ("g-3", "lost_on_restart", CHAT),
    ]
    assert [(g.id, g.status) for g in resumable] == [(daemon.id, "running")]
    assert promoted == []
    assert lost_again == lost
    assert (marked, after, told.notified) == (2, [], True)


async def test_the_boot_sweep_fills_freed_slots_from_the_queue(tmp_path: Path) -> None:
    async with registry(tmp_path, max_running=1) as goals:
        await create(goals, kind="interactive")
        await create(goals, kind="daemon")
        _, resumable, promoted = await goals.boot(["daemon"])
    assert [(g.id, g.status) for g in promoted] == [("g-2", "running")]
    assert [g.id for g in resumable] == ["g-2"]


async def test_find_filters_by_activity_kind_and_agent_in_creation_order(tmp_path: Path) -> None:
    async with registry(tmp_path, max_running=5) as goals:
        kinds: list[GoalKind] = ["bg", "daemon", "bg"]
        for kind in kinds:
            await create(goals, kind=kind)
        await goals.update("g-1", status="done")
        active = await goals.find()
        everything = await goals.find(active_only=False)
        bg = await goals.find(active_only=False, kind="bg")
        newest = await goals.find(active_only=False, limit=1)
        other_agent = await goals.find(agent="someone-else")
        running = await goals.running()
    assert [g.id for g in active] == ["g-2", "g-3"]
    assert [g.id for g in everything] == ["g-1", "g-2", "g-3"]
    assert [g.id for g in bg] == ["g-1", "g-3"]
    assert [g.id for g in newest] == ["g-3"]
    assert (other_agent, running) == ([], 2)


async def test_an_unknown_goal_is_reported_with_how_to_list_them(tmp_path: Path) -> None:
    async with registry(tmp_path) as goals:
        with pytest.raises(GoalNotFound, match=r"no goal 'g-404': list the goals with nexo/audit/goals/list"):
            await goals.get("g-404")
        with pytest.raises(GoalNotFound):
            await goals.update("g-404", phase="x")


async def test_long_texts_are_capped_instead_of_refused(tmp_path: Path) -> None:
    async with registry(tmp_path) as goals:
        await create(goals)
        goal, _ = await goals.update("g-1", phase="p" * 150, last_event="e" * 2000, outcome="o" * 3000)
    assert (len(goal.phase), len(goal.last_event), len(goal.outcome)) == (100, 1000, 2000)
    assert goal.phase.endswith("…")
