"""Pushed messages answered once per (agent, server, chat, message id), also after a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.intake.seen import PRUNE_EVERY, SeenPushes

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_the_same_id_in_two_chats_is_two_messages_and_a_repeat_is_one() -> None:
    seen = SeenPushes()
    first = [await seen.repeat(("nexo", "tg", chat, "1")) for chat in ("100", "200")]
    assert first == [False, False]
    assert await seen.repeat(("nexo", "tg", "100", "1"))
    assert not await seen.repeat(("other-agent", "tg", "100", "1"))


async def test_keys_survive_a_restart_and_expire_after_the_window(tmp_path: Path) -> None:
    path = tmp_path / "state" / "orchestrator" / "pushes.sqlite"
    clock = Clock()
    async with SeenPushes.open(path, window_s=60, clock=clock) as seen:
        assert not await seen.repeat(("nexo", "tg", "100", "1"))
    async with SeenPushes.open(path, window_s=60, clock=clock) as reopened:
        assert await reopened.repeat(("nexo", "tg", "100", "1"))
        assert not await reopened.repeat(("nexo", "tg", "200", "1"))
    clock.now += 60
    async with SeenPushes.open(path, window_s=60, clock=clock) as later:
        assert not await later.repeat(("nexo", "tg", "100", "1"))
    assert path.stat().st_mode & 0o077 == 0


async def test_old_keys_are_swept_and_the_file_keeps_about_its_limit(tmp_path: Path) -> None:
    clock = Clock()
    async with SeenPushes.open(tmp_path / "pushes.sqlite", window_s=60, limit=5, clock=clock) as seen:
        for n in range(PRUNE_EVERY + 1):
            clock.now += 0.1
            assert not await seen.repeat(("nexo", "tg", "c", str(n)))
        assert await seen.count() == 5
        assert await seen.repeat(("nexo", "tg", "c", str(PRUNE_EVERY)))
        clock.now += 61
        assert not await seen.repeat(("nexo", "tg", "c", str(PRUNE_EVERY)))
