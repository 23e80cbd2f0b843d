"""The sample channel's page in a real headless Chromium: type, see the event, see the reply."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from playwright.async_api import Page, async_playwright

from channel_servers.sample.server import WebChat, build_server
from channel_servers.sample.settings import SampleSettings
from shared.protocol.events import Event, PullParams, PullRequest, PullResult

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.scenario,
    pytest.mark.skipif(
        not Path("/usr/bin/chromium").exists(),
        reason="headless Chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)",
    ),
]

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
TIMEOUT_MS = 15_000


async def pull(client: Client, after: int = 0) -> list[Event]:
    request = PullRequest(params=PullParams(after=after, wait_ms=TIMEOUT_MS))
    return (await client.session.send_request(request, PullResult)).events


async def type_message(page: Page, text: str) -> None:
    await page.wait_for_function("socket.readyState === WebSocket.OPEN", timeout=TIMEOUT_MS)
    await page.fill("#text", text)
    await page.press("#text", "Enter")


async def test_a_message_typed_in_the_page_becomes_an_event_and_the_reply_shows_up(tmp_path: Path) -> None:
    settings = SampleSettings(state_dir=tmp_path, port=0, token="browser-token")
    web = WebChat(settings)
    with anyio.fail_after(90):
        async with Client(build_server(settings, web)) as client, async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                page = await browser.new_page()
                await page.goto(web.url)
                await type_message(page, "hello from chromium")
                [event] = await pull(client)
                meta = event.payload["meta"]
                sent = await client.call_tool(
                    "send_message",
                    {"text": "hello from nexo", "chat_id": meta["chat_id"], "reply_to": meta["message_id"]},
                )
                await page.locator("p.reply").wait_for(timeout=TIMEOUT_MS)
                shown = await page.locator("#log p").all_text_contents()

                # Leave the page: the next reply waits in the outbox until this tab comes back.
                await page.goto("about:blank")
                queued = await client.call_tool(
                    "send_message", {"text": "while away", "chat_id": meta["chat_id"]}
                )
                await page.go_back()
                await page.locator("p.reply").wait_for(timeout=TIMEOUT_MS)
                after_return = await page.locator("p.reply").all_text_contents()
            finally:
                await browser.close()
    assert event.payload["content"] == "hello from chromium"
    assert sorted(meta) == ["chat_id", "message_id", "user_id"]
    assert meta["user_id"] == "operator"
    assert event.dedupe_key == f"{meta['chat_id']}:{meta['message_id']}"
    assert sent.structured_content is not None
    assert sent.structured_content["status"] == "sent"
    assert shown == ["hello from chromium", "hello from nexo"]
    assert queued.structured_content is not None
    assert queued.structured_content["status"] == "queued"
    assert after_return == ["while away"]
