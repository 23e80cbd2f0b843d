"""The operator's journey in a real headless Chromium against ``nexo run`` in this process: log in
with the one-time link, watch a console message reach the feed, approve a goal's tool call from the
page (it runs once; a stale page's click is refused), follow a goal's status live, approve a pairing
code, see a MEMORY.md revision's diff, have the server end the live feed (the browser reconnects:
no gap, no duplicate), and see a contact's ``<script>`` as text. Screenshots of each page
at desktop and phone width go to ``$NEXO_SCREENSHOTS`` (default: the test's temporary directory)."""

from __future__ import annotations

import html
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from playwright.async_api import BrowserContext, Page, async_playwright

from orchestrator.cli.chat_loop import ChatSession
from orchestrator.dashboard.feed import LedgerFollower
from orchestrator.goals import AuditSink
from shared.protocol.console_wire import Approval, Reply, Say
from tests.dashboard.mesh import ledger, login_link, nexo
from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.console import next_frame, operator
from tests.mesh.inbox import send

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
WAIT_MS = 15_000
BOB = {"chat_id": "s1", "user_id": "u42", "user": "Bob"}
PAGES = ("/", "/goals", "/approvals", "/people", "/memory", "/schedules", "/spend", "/health")
SIZES = {"desktop": (1280, 800), "phone": (390, 844)}

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.scenario,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason=f"headless Chromium is not installed at {CHROMIUM} (apt-get install -y chromium)",
    ),
]


def model(request: RecordedRequest) -> ModelReply | CallTool:
    """Writes a note when asked to ("note: ..."), says it is done after the tool ran, else "ok"."""
    last = request.body["messages"][-1]
    if last.get("role") == "tool":
        return ModelReply("done")
    text = request.last_user_text or ""
    if "remember:" in text:
        entry = html.unescape(text.split("remember:", 1)[1].split("</channel>", 1)[0].strip())
        return CallTool("memory__memory_note", {"op": "append", "section": "People", "text": entry})
    if "note:" in text:
        return CallTool("notes__write_note", {"text": text.split("note:", 1)[1].split("<", 1)[0].strip()})
    return ModelReply("ok")


async def feed_seqs(page: Page) -> list[int]:
    seqs: list[str] = await page.eval_on_selector_all("#feed li", "items => items.map(i => i.dataset.seq)")
    return [int(seq) for seq in seqs]


async def flash(page: Page) -> str:
    return await page.locator("p.flash").inner_text(timeout=WAIT_MS)


async def screenshots(page: Page, base: str, into: Path) -> list[str]:
    """Each page at each width; none is wider than the screen (wide tables scroll in their box)."""
    taken = []
    for size, (width, height) in SIZES.items():
        await page.set_viewport_size({"width": width, "height": height})
        for path in PAGES:
            await page.goto(base + path)
            assert (path, await page.evaluate("document.documentElement.scrollWidth")) <= (path, width)
            name = f"{path.strip('/') or 'activity'}-{size}.png"
            await page.screenshot(path=str(into / name), full_page=True)
            taken.append(name)
    return taken


@dataclass
class Journey:
    tmp_path: Path
    base: str
    context: BrowserContext
    page: Page
    console: ChatSession
    llm: FakeLLM
    follower: LedgerFollower
    sink: AuditSink

    @property
    def state(self) -> Path:
        return self.tmp_path / "state"

    async def ledger(self, **params: Any) -> list[dict[str, Any]]:
        """The ledger once the orchestrator's entries so far are in (its sink sends them in bursts)."""
        assert await self.sink.flush(timeout=WAIT_MS / 1000)
        return await ledger(self.state, **params)

    async def live_feed(self, path: str) -> None:
        await self.page.goto(self.base + path)
        await self.page.wait_for_selector("#feed[data-connected=yes]", state="attached")


async def login(context: BrowserContext, state: Path) -> Page:
    """What `nexo dashboard` prints, followed once; a second use is refused."""
    link = await login_link(state)
    page = await context.new_page()
    await page.goto(link)
    assert await page.locator("h1").inner_text() == "Activity"
    reused = await (await context.new_page()).goto(link)
    assert reused is not None
    assert reused.status == 401
    return page


async def console_message_reaches_the_feed(journey: Journey) -> None:
    await journey.live_feed("/")
    await journey.console.send(Say(id="m1", text="hello from the console"))
    await journey.page.locator("#feed li.kind-channel", has_text="channel:console").first.wait_for()
    await next_frame(journey.console, Reply)


async def approval_from_the_page(journey: Journey) -> None:
    await journey.console.send(Say(id="m2", text="note: buy milk"))
    asked = await next_frame(journey.console, Approval)
    card = f"#approval-{asked.request_id}"
    stale = await journey.context.new_page()
    for each in (journey.page, stale):
        await each.goto(journey.base + "/approvals")
        await each.locator(card).wait_for()
    await journey.page.locator(f"{card} button", has_text="Approve").click()
    assert await flash(journey.page) == f"Approved: request {asked.request_id}."
    await stale.locator(f"{card} button", has_text="Deny").click()
    expected = f"Refused: request {asked.request_id} was already answered: allowed by dashboard:ana"
    assert await flash(stale) == expected
    await next_frame(journey.console, Reply)
    assert (journey.tmp_path / "notes").read_text() == "buy milk\n"
    [answered] = await journey.ledger(kind="approval_answered", limit=5)
    assert answered["subject"] == asked.request_id
    assert (answered["body"]["answered_by"], answered["body"]["approver"]) == ("dashboard", "dashboard:ana")


async def goal_cancelled_from_its_page(journey: Journey) -> None:
    """A goal waiting for an approval, cancelled from its page: the prompt goes, the tool never runs."""
    page = journey.page
    await journey.console.send(Say(id="m3", text="note: sell the car"))
    asked = await next_frame(journey.console, Approval)
    await page.goto(journey.base + "/goals")
    await page.locator("tr", has_text="running").locator("a").first.click()
    goal_id = (await page.locator("h1").inner_text()).removeprefix("Goal ")
    assert "note: sell the car" in await page.locator("main pre").first.inner_text()
    watcher = await journey.context.new_page()
    await watcher.goto(page.url)
    await watcher.wait_for_selector("#feed[data-connected=yes]", state="attached")
    assert await watcher.locator("#goal-status dd[class^=status-]").inner_text() == "running"
    await page.locator("button", has_text="Cancel this goal").click()
    assert await flash(page) == f"Cancelled goal {goal_id}."
    # The page opened before the cancel follows it without a reload: status and no Cancel button.
    await watcher.locator("#goal-status dd.status-cancelled").wait_for()
    assert await watcher.locator("#goal-status button").count() == 0
    await watcher.close()
    await page.goto(journey.base + "/approvals")
    await page.locator("p.empty").wait_for()
    assert await page.locator(f"#approval-{asked.request_id}").count() == 0
    assert (journey.tmp_path / "notes").read_text() == "buy milk\n"


async def pairing_from_the_people_page(journey: Journey) -> None:
    page = journey.page
    await journey.live_feed("/?kind=pairing")
    await send(journey.tmp_path, [{"content": "hi, this is Bob", "meta": {**BOB, "message_id": "b1"}}])
    await page.locator("#feed li.kind-pairing").first.wait_for()
    asked = await next_frame(journey.console, Approval)
    assert asked.tool_name == "nexo__pair_sender"
    await page.goto(journey.base + "/people")
    await page.locator("li.card", has_text="u42").locator("button", has_text="Approve").click()
    assert await flash(page) == "Approved: paired."
    assert await page.locator("table td code", has_text="u42").count() == 1
    # The one-tap prompt the gate raised for the same request is withdrawn: nothing left to answer.
    await page.goto(journey.base + "/approvals")
    assert await page.locator(f"#approval-{asked.request_id}").count() == 0


async def memory_revision_diff(journey: Journey) -> None:
    """A MEMORY.md edit the operator allowed, shown as its revision's diff: added lines marked, escaped."""
    page = journey.page
    await journey.console.send(Say(id="m4", text="remember: Ana likes <b>tea</b>"))
    asked = await next_frame(journey.console, Approval)
    assert asked.tool_name == "memory__memory_note"
    await journey.console.send(Say(id="m5", text=f"yes {asked.request_id}"))
    while (await next_frame(journey.console, Reply)).text != "done":
        pass
    [call] = await journey.ledger(kind="tool_call", limit=1)
    assert (call["body"]["tool"], call["body"]["outcome"]) == ("memory__memory_note", "ok"), call
    await page.goto(journey.base + "/memory")
    assert await page.locator("main ol a code").count() == 1, await page.locator("main").inner_text()
    await page.locator("main ol a code").first.click()
    assert await page.locator("h2#diff").inner_text() == f"What revision {page.url[-40:][:10]} changed"
    assert await page.locator("pre.diff span.add").all_inner_texts() == [
        "+## People",
        "+",
        "+- Ana likes <b>tea</b>",
    ]
    assert await page.locator("pre.diff b").count() == 0


async def contact_script_is_text(journey: Journey) -> None:
    page, asked_model = journey.page, len(journey.llm.requests) + 1
    script = "<script>window.pwned = 1</script> hello"
    await send(journey.tmp_path, [{"content": script, "meta": {**BOB, "message_id": "b2"}}])
    await anyio.to_thread.run_sync(journey.llm.wait_for_requests, asked_model)
    await page.goto(journey.base + "/goals")
    assert await page.locator("td.prompt", has_text="window.pwned").inner_text() == script
    assert await page.evaluate("typeof window.pwned") == "undefined"
    assert await page.locator("main script").count() == 0


async def feed_resumed_after_the_server_ends_it(journey: Journey) -> None:
    """The dashboard ends the open streams (as a restart of its listener does); the browser's own
    EventSource reconnects with Last-Event-ID and shows what was written meanwhile once each."""
    page = journey.page
    await journey.live_feed("/")
    journey.follower.end_streams()
    await page.wait_for_selector("#feed[data-connected=no]", state="attached")
    for n in range(3):
        await journey.console.send(Say(id=f"r{n}", text=f"while the feed is down {n}"))
        await next_frame(journey.console, Reply)
    [newest] = await ledger(journey.state, limit=1)
    await page.locator(f"#e{newest['seq']}").wait_for(state="attached")
    assert await page.get_attribute("#feed", "data-connected") == "yes"
    shown = await feed_seqs(page)
    assert len(shown) == len(set(shown))
    written = [e["seq"] for e in await ledger(journey.state, since_seq=min(shown) - 1, limit=1000)]
    assert sorted(shown) == [seq for seq in written if seq <= max(shown)]
    # What the browser sends when it reconnects by itself: the stream goes on after that entry.
    resumed_after = written[-4]
    assert await stream_ids(journey, resumed_after, 3) == written[-3:]


async def stream_ids(journey: Journey, last_event_id: int, count: int) -> list[int]:
    """The first ``count`` event ids of the feed stream opened with ``Last-Event-ID``."""
    cookies = {cookie["name"]: cookie["value"] for cookie in await journey.context.cookies()}
    headers = {"Last-Event-ID": str(last_event_id)}
    ids: list[int] = []
    async with (
        httpx2.AsyncClient(cookies=cookies, timeout=WAIT_MS / 1000) as client,
        client.stream("GET", f"{journey.base}/feed/stream", headers=headers) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                ids.append(int(line.removeprefix("id:").strip()))
                if len(ids) == count:
                    break
    return ids


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where the screenshots go: ``$NEXO_SCREENSHOTS`` (kept as a test artifact) or the test's tmp dir."""
    into = Path(os.environ.get("NEXO_SCREENSHOTS") or tmp_path / "screenshots")
    into.mkdir(parents=True, exist_ok=True)
    return into


async def every_page_says_what_is_there(journey: Journey) -> None:
    """The pages without a step of their own, against the real servers: empty states and figures."""
    page = journey.page
    await page.goto(journey.base + "/approvals")
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.textContent") == "Skip to content"
    [newest] = await ledger(journey.state, limit=1)
    away = f"{newest['seq'] - 5}:{time.time() - 3600:.0f}"
    await journey.context.add_cookies([{"name": "nexo_seen", "value": away, "url": journey.base}])
    await page.goto(journey.base + "/")
    assert await page.locator("section.away h2").inner_text() == "While you were away"
    assert await page.locator("section.away li").count() >= 1
    await page.goto(journey.base + "/")
    assert await page.locator("section.away").count() == 0
    await page.goto(journey.base + "/memory?q=milk")
    assert await page.locator("main p.empty").first.inner_text() == "Nothing remembered matches 'milk'."
    await page.goto(journey.base + "/schedules")
    assert "No schedules." in await page.locator("main p.empty").first.inner_text()
    await page.goto(journey.base + "/spend")
    assert await page.locator("figure.chart svg rect").count() == 3 * 14
    assert await page.locator("table", has_text="Of the day's tokens").locator("tbody tr").count() == 14
    assert await page.locator("table a[href^='/goals/']").count() >= 1
    assert "2,000,000 tokens" in await page.locator("table", has_text="per_day").inner_text()
    assert "of 200,000" in await page.locator("table", has_text="Of its budget").inner_text()
    await page.goto(journey.base + "/health")
    states = await page.locator("td[class^=state-]").all_inner_texts()
    assert states == ["ready"] * 7
    assert "intact" in await page.locator("main").inner_text()
    assert await page.locator("table code", has_text="nexo_tool_calls").count() >= 1


async def test_the_operator_works_from_the_dashboard(tmp_path: Path, shots: Path) -> None:
    with FakeLLM(default=model) as llm:
        async with nexo(tmp_path, llm.openai_base_url) as orch, async_playwright() as playwright:
            assert orch.dashboard is not None
            assert orch.dashboard.url is not None
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                context = await browser.new_context()
                context.set_default_timeout(WAIT_MS)
                page = await login(context, tmp_path / "state")
                async with operator(tmp_path / "state") as console:
                    journey = Journey(
                        tmp_path,
                        orch.dashboard.url,
                        context,
                        page,
                        console,
                        llm,
                        orch.dashboard.follower,
                        orch.sink,
                    )
                    await console_message_reaches_the_feed(journey)
                    await approval_from_the_page(journey)
                    await goal_cancelled_from_its_page(journey)
                    await pairing_from_the_people_page(journey)
                    await contact_script_is_text(journey)
                    await memory_revision_diff(journey)
                    await feed_resumed_after_the_server_ends_it(journey)
                    await every_page_says_what_is_there(journey)
                taken = await screenshots(page, orch.dashboard.url, shots)
            finally:
                await browser.close()
    assert len(taken) == 2 * len(PAGES)
