"""The shell tool reports progress to a caller that asks for it."""

from __future__ import annotations

import pytest

from servers.workspace.settings import WorkspaceSettings
from tests.servers.workspace.conftest import connected

pytestmark = pytest.mark.anyio


async def test_a_shell_command_reports_its_start_and_its_end_out_of_the_timeout(
    settings: WorkspaceSettings,
) -> None:
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    async with connected(settings) as client:
        result = await client.call_tool(
            "shell", {"command": "true", "timeout_s": 7}, progress_callback=on_progress
        )
    assert result.is_error is False
    assert [(total, message) for _, total, message in reports] == [(7, "started"), (7, "finished")]
    assert reports[0][0] == 0 < reports[1][0] < 7
