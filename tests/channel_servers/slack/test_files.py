"""Files: shared files saved into the workspace with the bot token, capped; workspace files uploaded."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from channel_servers.slack.files import slack_host
from tests.channel_servers.slack.support import DM, GENERAL, dm, slack_channel
from tests.channel_servers.support import pull
from tests.fakes.slack_api import FakeSlack

pytestmark = pytest.mark.anyio


async def test_a_shared_file_is_saved_into_the_workspace_once_and_referenced(tmp_path: Path) -> None:
    fake = FakeSlack()
    async with slack_channel(tmp_path, fake, max_file_bytes=1000) as running:
        small = fake.add_file("notes.txt", b"remember the milk", "text/plain")
        big = fake.add_file("video.mp4", b"x" * 2000, "video/mp4")
        shared = dm("see attached", "1700000000.000100", subtype="file_share", files=[small, big])
        fake.inject(shared)
        fake.inject(shared)  # delivered again: stored once, its file downloaded once
        events = await pull(running.client)
        with anyio.fail_after(5):
            await fake.all_acked()
        more = await pull(running.client, after=events[-1].seq, count=0)
    lines = str(events[0].payload["content"]).splitlines()
    assert lines[0] == "see attached"
    assert lines[1].startswith("[attachment: inbox/slack/")
    assert "notes.txt (text/plain" in lines[1]
    assert lines[2] == "[attachment not saved: video.mp4 (video/mp4) is larger than 1000 bytes]"
    assert more == []
    assert fake.downloads == [small["id"]]
    saved = tmp_path / "workspace" / lines[1].removeprefix("[attachment: ").split(" (")[0]
    assert saved.read_bytes() == b"remember the milk"


async def test_the_bot_token_goes_to_slacks_hosts_only(tmp_path: Path) -> None:
    fake = FakeSlack()
    async with slack_channel(tmp_path, fake) as running:
        forged = fake.add_file("x.txt", b"x", "text/plain") | {
            "url_private_download": "https://attacker.example/steal",
            "url_private": "https://attacker.example/steal",
        }
        fake.inject(dm("here", "1700000000.000100", subtype="file_share", files=[forged]))
        events = await pull(running.client)
    assert (
        events[0].payload["content"]
        == "here\n[attachment not saved: x.txt (text/plain) could not be downloaded]"
    )
    assert slack_host("https://files.slack.com/files-pri/T1-F1/a.png", "https://slack.com/api")
    assert slack_host("https://files.slack-gov.com/files-pri/T1-F1/a.png", "https://slack-gov.com/api")
    assert not slack_host("http://files.slack.com/a", "https://slack.com/api")
    assert not slack_host("https://slack.com.attacker.example/a", "https://slack.com/api")


async def test_a_workspace_file_is_uploaded_into_the_thread_with_its_caption(tmp_path: Path) -> None:
    fake = FakeSlack()
    async with slack_channel(tmp_path, fake) as running:
        report = tmp_path / "workspace" / "report.csv"
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_bytes(b"a,b\n1,2\n")
        result = await running.client.call_tool(
            "send_file",
            {"chat_id": f"{GENERAL}:1700000000.000200", "path": "report.csv", "caption": "**Q3** numbers"},
        )
        refused = await running.client.call_tool("send_file", {"chat_id": "C0000009", "path": "report.csv"})
    assert result.structured_content is not None
    assert result.structured_content["status"] == "sent"
    file_id = str(result.structured_content["platform_message_id"])
    assert fake.uploads[file_id] == b"a,b\n1,2\n"
    [shared] = [p.params for p in fake.posted if p.method == "files.completeUploadExternal"]
    assert (shared["channel_id"], shared["thread_ts"], shared["initial_comment"]) == (
        GENERAL,
        "1700000000.000200",
        "*Q3* numbers",
    )
    assert refused.is_error
    assert "not_in_channel" in str(refused.content)
    assert DM in fake.channels
