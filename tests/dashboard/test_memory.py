"""The Memory page refuses a revision that is not one, before asking the memory server anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dashboard.support import dashboard

pytestmark = pytest.mark.anyio


async def test_a_revision_that_is_not_a_commit_id_is_refused_with_where_to_pick_one(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as board:
        await board.login("ana")
        answer = await board.client.get("/memory", params={"rev": "HEAD~1; <b>"})
    assert answer.status_code == 400
    assert "&#x27;head~1; &lt;b&gt;&#x27; is not a revision: pick one from the list on /memory" in answer.text
