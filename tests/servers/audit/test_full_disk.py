"""The audit server on a full disk: appends are refused with STORAGE_FULL, it stays up, and the chain
still verifies afterwards (no half-written entry)."""

from __future__ import annotations

import anyio
import pytest
from mcp import MCPError

from servers.audit.settings import AuditSettings
from shared.protocol.audit.methods import (
    AppendParams,
    AppendRequest,
    AppendResult,
    VerifyParams,
    VerifyRequest,
    VerifyResult,
)
from shared.protocol.storage import STORAGE_FULL
from tests.full_disk import FullDisk, refusal, storage_status, until_refused
from tests.servers.audit.conftest import connected, notice

pytestmark = pytest.mark.anyio


async def test_appends_on_a_full_disk_are_refused_and_the_ledger_still_verifies(full_disk: FullDisk) -> None:
    settings = AuditSettings(state_dir=full_disk.root, trim_interval_s=0)
    with anyio.fail_after(30):
        async with connected(settings) as client:

            async def append(n: int) -> AppendResult | MCPError:
                request = AppendRequest(params=AppendParams(entries=[notice(f"entry {n}")]))
                try:
                    return await client.session.send_request(request, AppendResult)
                except MCPError as exc:
                    return exc

            await append(0)
            full_disk.fill()
            answers = await until_refused(append, refused=lambda answer: isinstance(answer, MCPError))
            error = answers[-1]
            assert isinstance(error, MCPError)
            assert (error.error.code, error.error.message) == (STORAGE_FULL, refusal(settings.database))
            assert (await storage_status(client)).full[0].path == str(settings.database)

            full_disk.free()
            assert isinstance(await append(len(answers) + 1), AppendResult)
            assert (await storage_status(client)).full == []
            verified = await client.session.send_request(VerifyRequest(params=VerifyParams()), VerifyResult)
    stored = 1 + (len(answers) - 1) + 1
    assert (verified.report.ok, verified.report.checked, verified.report.problem) == (True, stored, None)
