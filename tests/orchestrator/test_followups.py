"""A session's follow-ups: in order, each settled even when the intake is cancelled, the rest given up."""

from __future__ import annotations

import anyio
import pytest

from orchestrator.intake.followups import FollowUps

pytestmark = pytest.mark.anyio

WAIT_S = 5.0


class Recorded:
    """A follow-up that writes what it did to a shared log; ``hold`` keeps its settle waiting."""

    def __init__(
        self, name: str, log: list[str], *, hold: anyio.Event | None = None, fail: bool = False
    ) -> None:
        self.name = name
        self.log = log
        self.hold = hold
        self.fail = fail
        self.resting = anyio.Event()

    async def settle(self) -> None:
        if self.hold is not None:
            await self.hold.wait()
        if self.fail:
            raise RuntimeError(f"{self.name} could not settle")
        self.log.append(f"settle {self.name}")

    async def rest(self) -> None:
        self.resting.set()
        self.log.append(f"rest {self.name}")

    def close(self) -> None:
        self.log.append(f"close {self.name}")


async def test_follow_ups_run_in_order_and_a_failure_does_not_stop_the_next() -> None:
    log: list[str] = []
    follow_ups = FollowUps("chat")
    first, second = Recorded("a", log, fail=True), Recorded("b", log)
    async with anyio.create_task_group() as tg:
        tg.start_soon(follow_ups.run)
        follow_ups.add(first)
        follow_ups.add(second)
        with anyio.fail_after(WAIT_S):
            await second.resting.wait()
        tg.cancel_scope.cancel()
    assert log == ["rest a", "close a", "settle b", "rest b", "close b"]
    assert follow_ups.pending == 0


async def test_what_is_queued_when_the_session_is_cancelled_is_still_settled() -> None:
    log: list[str] = []
    follow_ups = FollowUps("chat")
    release = anyio.Event()
    held, queued = Recorded("held", log, hold=release), Recorded("queued", log)
    session = anyio.CancelScope()

    async def run() -> None:
        with session:
            await follow_ups.run()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        follow_ups.add(held)
        follow_ups.add(queued)
        await anyio.wait_all_tasks_blocked()
        # The cancel lands while the first settle waits: it is shielded, and the queued one follows.
        session.cancel()
        await anyio.wait_all_tasks_blocked()
        assert log == []
        release.set()
    assert log == ["settle held", "close held", "settle queued", "close queued"]


async def test_a_cancel_during_the_rest_gives_up_the_rest_but_closes() -> None:
    log: list[str] = []
    follow_ups = FollowUps("chat")

    class Waiting(Recorded):
        async def rest(self) -> None:
            self.resting.set()
            await anyio.sleep_forever()

    waiting = Waiting("w", log)
    async with anyio.create_task_group() as tg:
        tg.start_soon(follow_ups.run)
        follow_ups.add(waiting)
        with anyio.fail_after(WAIT_S):
            await waiting.resting.wait()
        tg.cancel_scope.cancel()
    assert log == ["settle w", "close w"]
