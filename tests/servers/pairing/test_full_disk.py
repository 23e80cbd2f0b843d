"""The pairing server on a full disk: a seed is refused with STORAGE_FULL and the server stays up."""

from __future__ import annotations

import anyio
import pytest
from mcp import MCPError

from servers.pairing.settings import PairingSettings
from shared.protocol.pairing import ListParams, ListRequest, ListResult, SeedParams, SeedRequest, SeedResult
from shared.protocol.storage import STORAGE_FULL
from tests.full_disk import FullDisk, refusal, storage_status, until_refused
from tests.servers.pairing.conftest import connected

pytestmark = pytest.mark.anyio


async def test_a_seed_on_a_full_disk_is_refused_by_name_and_pairing_keeps_answering(
    full_disk: FullDisk,
) -> None:
    settings = PairingSettings(state_dir=full_disk.root)
    with anyio.fail_after(30):
        async with connected(settings) as client:

            async def seed(n: int) -> SeedResult | MCPError:
                params = SeedParams(channel="telegram", senders=[str(1001 + n)], by="operator")
                try:
                    return await client.session.send_request(SeedRequest(params=params), SeedResult)
                except MCPError as exc:
                    return exc

            await seed(-1)
            full_disk.fill()
            answers = await until_refused(seed, refused=lambda answer: isinstance(answer, MCPError))
            error = answers[-1]
            assert isinstance(error, MCPError)
            assert (error.error.code, error.error.message) == (STORAGE_FULL, refusal(settings.database))
            assert [file.path for file in (await storage_status(client)).full] == [str(settings.database)]
            listed = await client.session.send_request(ListRequest(params=ListParams()), ListResult)
            assert len(listed.records) == len(answers)  # the first seed and every accepted one

            full_disk.free()
            assert isinstance(await seed(len(answers)), SeedResult)
            assert (await storage_status(client)).full == []
