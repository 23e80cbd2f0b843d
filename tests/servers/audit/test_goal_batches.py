"""The goal registry's writes join the group-commit writer's batches, each undone alone when refused."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from servers.audit.errors import GoalNotFound, WriterStopped
from servers.audit.settings import AuditSettings
from servers.audit.state import AuditState, open_state
from shared.protocol.audit.entries import Appended
from shared.protocol.audit.goals import Goal, Origin
from tests.servers.audit.conftest import notice

pytestmark = pytest.mark.anyio

CHAT = Origin(source="channel:console", session_key="console:operator", chat_id="operator")


def settings(tmp_path: Path) -> AuditSettings:
    return AuditSettings(state_dir=tmp_path, trim_interval_s=0)


async def test_a_goal_created_beside_appends_shares_their_commit(tmp_path: Path) -> None:
    created: list[Goal] = []
    appended: list[Appended] = []

    async def create(state: AuditState) -> None:
        goal, _ = await state.goals.create(agent="nexo", kind="interactive", origin=CHAT, prompt="hi")
        created.append(goal)

    async def append(state: AuditState) -> None:
        appended.extend(await state.committer.append([notice("traffic")]))

    async with open_state(settings(tmp_path)) as state:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(append, state)
                tg.start_soon(create, state)
        goal_entries = await state.ledger.tail(kind="goal", goal_id=created[0].id)
        batches = state.committer.batches
        report = await state.ledger.verify()
    assert (created[0].status, batches, report.ok) == ("running", 1, True)
    assert [entry.seq for entry in goal_entries] == [appended[0].seq + 1]


async def test_a_refused_goal_change_is_undone_alone_and_its_batch_commits(tmp_path: Path) -> None:
    outcomes: dict[str, object] = {}

    async def refused(state: AuditState) -> None:
        with pytest.raises(GoalNotFound) as caught:
            await state.goals.update("g-nowhere", status="done")
        outcomes["refused"] = str(caught.value)

    async def create(state: AuditState) -> None:
        goal, _ = await state.goals.create(
            agent="nexo", kind="bg", origin=CHAT, prompt="water the plants", goal_id="g-kept"
        )
        outcomes["created"] = goal.status

    async def append(state: AuditState) -> None:
        outcomes["appended"] = [entry.seq for entry in await state.committer.append([notice("boot")])]

    async with open_state(settings(tmp_path)) as state:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(append, state)
                tg.start_soon(refused, state)
                tg.start_soon(create, state)
        kept = await state.goals.get("g-kept")
        head = await state.ledger.head()
        batches = state.committer.batches
        report = await state.ledger.verify(head)
    assert "no goal 'g-nowhere'" in str(outcomes["refused"])
    assert (outcomes["appended"], outcomes["created"], kept.status) == ([1], "running", "running")
    assert (head.seq, batches, report.ok) == (2, 1, True)


async def test_a_goal_write_after_the_writer_stopped_is_refused(tmp_path: Path) -> None:
    async with open_state(settings(tmp_path)) as state:
        goals = state.goals
    with pytest.raises(WriterStopped, match="the audit writer is not running"):
        await goals.create(agent="nexo", kind="bg", origin=CHAT, prompt="late")
