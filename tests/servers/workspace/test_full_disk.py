"""The workspace on a full disk: write_file and edit_file are refused naming the workspace, the file
keeps its previous content, and writes succeed again once space is freed."""

from __future__ import annotations

import anyio
import pytest

from servers.workspace.settings import WorkspaceSettings
from tests.full_disk import FullDisk, refusal, storage_status
from tests.servers.workspace.conftest import call, connected, refused

pytestmark = pytest.mark.anyio


async def test_writes_on_a_full_disk_are_refused_by_name_and_leave_the_file_as_it_was(
    full_disk: FullDisk,
) -> None:
    settings = WorkspaceSettings(state_dir=full_disk.root, sandbox="none")
    root = settings.workspace
    with anyio.fail_after(30):
        async with connected(settings) as client:
            await call(client, "write_file", path="notes.txt", content="first draft\n")
            full_disk.fill()
            bigger = "second draft\n" * 1000
            assert await refused(client, "write_file", path="notes.txt", content=bigger) == refusal(root)
            edited = await refused(
                client, "edit_file", path="notes.txt", old_string="first", new_string=bigger
            )
            assert edited == refusal(root)
            assert (root / "notes.txt").read_text() == "first draft\n"
            assert sorted(p.name for p in root.iterdir()) == ["notes.txt"]  # no temp file left behind
            assert [file.path for file in (await storage_status(client)).full] == [str(root)]

            full_disk.free()
            await call(client, "write_file", path="notes.txt", content=bigger)
            assert (await storage_status(client)).full == []
    assert (root / "notes.txt").read_text() == bigger
