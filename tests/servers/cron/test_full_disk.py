"""The cron server on a full disk: cron_create answers is_error naming the file, a due fire that cannot
be recorded waits instead of taking the server down, and fires once space is back."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from servers.cron.jitter import JitterKnobs
from servers.cron.scheduler import FULL_DISK_RETRY_S
from servers.cron.settings import CronSettings
from tests.full_disk import FullDisk, refusal, storage_status, until_refused
from tests.servers.cron.conftest import ManualClock, Pacer, at, call, connected, fire_rows

pytestmark = pytest.mark.anyio


def create(n: int) -> dict[str, str]:
    return {"schedule": "0 * * * *", "prompt": f"check the mail {n} " + "x" * 1000}


async def test_a_full_disk_refuses_new_entries_and_holds_due_fires_until_space_is_back(
    full_disk: FullDisk, clock: ManualClock
) -> None:
    settings = CronSettings(state_dir=full_disk.root, jitter=JitterKnobs(enabled=False))
    pacer = Pacer()
    with anyio.fail_after(30):
        async with connected(settings, clock, pacer=pacer) as client:
            first = (await call(client, "cron_create", create(0), binding="home"))["id"]
            full_disk.fill()

            async def attempt(n: int) -> types.CallToolResult:
                return await client.call_tool("cron_create", create(n + 1))

            answers = await until_refused(attempt, refused=lambda result: bool(result.is_error))
            assert [block.text for block in answers[-1].content if isinstance(block, types.TextContent)] == [
                f"Error executing tool cron_create: {refusal(settings.database)}"
            ]

            clock.set(at(13))
            await pacer.step()  # the 13:00 fire cannot be recorded: the tick fails, the server stays
            assert [file.path for file in (await storage_status(client)).full] == [str(settings.database)]
            assert fire_rows(settings.database, first) == []

            full_disk.free()
            await pacer.step()
            assert (await storage_status(client)).full == []
    assert pacer.requested[1] == FULL_DISK_RETRY_S
    assert fire_rows(settings.database, first)[0][:2] == (
        at(13).isoformat(timespec="microseconds"),
        "delivered",
    )
