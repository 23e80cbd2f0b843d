"""Dashboard feed latency: from a ledger entry's commit to its row in the DOM of 10 open pages.

``python -m bench --only dashboard_feed [--quick]``. ``nexo run`` runs in this process with the
console, audit and pairing servers as real children and the dashboard on a free port; a headless
Chromium (Debian's, at /usr/bin/chromium: nothing is downloaded) opens ``PAGES`` Activity pages,
each in its own browser context with its own login. Console messages then write entries (channel
markers, goal transitions, turns); each page notes the moment each entry's row is added (a
MutationObserver), and the latency is that moment minus the entry's ``at`` (the audit server's
clock: the same machine).

The baseline, measured in the same run: one read of the newest entry through the daemon's control
socket (the path every dashboard read takes), the floor of any reader that asks the ledger. Cannot
run without Chromium, and says so.
"""

from __future__ import annotations

import tempfile
import time
from datetime import datetime
from pathlib import Path

import anyio

from bench.stats import Result, table
from bench.support import describe, progress

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
PAGES = 10
TARGET_P50_MS = 1000.0
"""The product's promise: an entry shows within a second."""
BASELINE = "one ledger read through the control socket"
WATCH = """() => {
  window.arrivals = {};
  new MutationObserver((changes) => {
    const now = performance.timeOrigin + performance.now();
    for (const change of changes) for (const node of change.addedNodes)
      if (node.dataset && node.dataset.seq && !(node.dataset.seq in window.arrivals))
        window.arrivals[node.dataset.seq] = now;
  }).observe(document.getElementById("feed"), { childList: true });
}"""


def _epoch_ms(at: str) -> float:
    return datetime.fromisoformat(at).timestamp() * 1000


async def _measure(messages: int, row: Result) -> None:
    """Fills ``row``: its samples (entry to DOM) and its baseline (one ledger read)."""

    from playwright.async_api import async_playwright

    from shared.protocol.console_wire import Reply as ConsoleReply
    from shared.protocol.console_wire import Say
    from tests.dashboard.mesh import ledger, login_link, nexo
    from tests.fakes.llm import FakeLLM, Reply
    from tests.mesh.console import next_frame, operator

    with (
        tempfile.TemporaryDirectory(prefix="nexo-bench-dashboard-") as tmp,
        FakeLLM(default=Reply("ok")) as llm,
    ):
        tmp_path = Path(tmp)
        state = tmp_path / "state"
        async with nexo(tmp_path, llm.openai_base_url) as orch, async_playwright() as playwright:
            assert orch.dashboard is not None
            browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
            try:
                # One browser context per page, as ten devices would be: a browser opens at most
                # six connections to one host, and each page holds one for its stream.
                pages = []
                for _ in range(PAGES):
                    page = await (await browser.new_context()).new_page()
                    await page.goto(await login_link(state))
                    await page.wait_for_selector("#feed[data-connected=yes]", state="attached")
                    await page.evaluate(WATCH)
                    pages.append(page)
                [before] = await ledger(state, limit=1)
                progress(f"dashboard feed: {PAGES} pages open, {messages} console messages")
                async with operator(state) as console:
                    for n in range(messages):
                        started = time.perf_counter()
                        await ledger(state, limit=1)
                        row.baseline.append((time.perf_counter() - started) * 1000)
                        await console.send(Say(id=f"b{n}", text=f"bench message {n}"))
                        await next_frame(console, ConsoleReply)
                [newest] = await ledger(state, limit=1)
                written = await ledger(state, since_seq=before["seq"], limit=1000)
                for page in pages:
                    await page.locator(f"#e{newest['seq']}").wait_for(state="attached", timeout=30_000)
                    arrivals: dict[str, float] = await page.evaluate("window.arrivals")
                    for entry in written:
                        arrived = arrivals.get(str(entry["seq"]))
                        if arrived is None:
                            row.errors.append(f"entry {entry['seq']} never reached a page")
                            continue
                        row.samples.append(arrived - _epoch_ms(entry["at"]))
            finally:
                await browser.close()


def measure(quick: bool) -> list[Result]:
    row = Result(f"dashboard feed: ledger entry to DOM, {PAGES} pages", "ms", BASELINE, target=TARGET_P50_MS)
    if not CHROMIUM.exists():
        row.errors.append(f"cannot run: no Chromium at {CHROMIUM} (apt-get install -y chromium)")
        return [row]
    try:
        anyio.run(_measure, 5 if quick else 20, row)
    except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
        row.errors.append(describe(exc))
    return [row]


if __name__ == "__main__":
    import sys

    print(table(measure("--quick" in sys.argv)))
