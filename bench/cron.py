"""Cron fire lateness and idle CPU of a real ``python -m servers.cron`` child over stdio.

``python -m bench.cron [--quick]``. ``ENTRIES`` one-shot entries are created through the
``cron_create`` tool, due evenly over a window (20 s quick, 60 s full) that starts once they all
exist. Jitter is off, so a fire's ``due_at`` is its slot. A client long-polls ``nexo/events/pull``
as the orchestrator does, acknowledges each batch, and records for every ``cron_fire`` event its
lateness: the wall time it was received minus its ``due_at`` (target 1 s at the median and p99).
Baseline: the lateness of a bare ``anyio.sleep`` timer in this process, asked to wake at
wall-clock targets the same way: the floor any sleeping scheduler stands on.

Then idle CPU: with entries due an hour later and a long-poll waiting, the server's utime + stime
(``/proc/<pid>/stat``) over a 10 s window, as a percentage of one core. Baseline: an idle
``python -c "import time; time.sleep(...)"`` measured the same way.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
from mcp import StdioServerParameters
from mcp.client import Client

from bench.mesh_run import workdir
from bench.stats import Result, percentile, run_alone
from bench.support import cpu_seconds, describe, progress
from shared.protocol.cron import FirePayload, tool_meta
from shared.protocol.events import AckParams, AckRequest, AckResult, PullParams, PullRequest, PullResult
from tests.mesh.harness import REPO, child_pids

ENTRIES = 10_000
CREATORS = 16
TARGET_LATENESS_MS = 1_000.0
TARGET_IDLE_CPU_PCT = 1.0
IDLE_WINDOW_S = 10.0
IDLE_ENTRIES = 50
TIMER_SAMPLES = 300
LEAD_S = 5.0
"""Room between the last creation and the first due time."""
DRAIN_GRACE_S = 60.0
META = tool_meta("bench", "nexo")
LATENESS_BASELINE = "a bare anyio.sleep timer waking at wall-clock targets"
CPU_BASELINE = 'an idle python -c "import time; time.sleep(...)"'


def server_params(state_dir: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")}
    env.update(
        {
            "NEXO_CRON_STATE_DIR": str(state_dir),
            "NEXO_CRON_JITTER__ENABLED": "false",
            "NEXO_CRON_MAX_ENTRIES_PER_BINDING": str(2 * ENTRIES),
            "NEXO_CRON_MAX_PENDING_EVENTS": str(4 * ENTRIES),
            "NEXO_LOG_LEVEL": "WARNING",
        }
    )
    return StdioServerParameters(command=sys.executable, args=["-m", "servers.cron"], env=env, cwd=str(REPO))


async def idle_cpu_pct(pid: int) -> float:
    before = cpu_seconds(pid)
    await anyio.sleep(IDLE_WINDOW_S)
    after = cpu_seconds(pid)
    if before is None or after is None:
        raise RuntimeError(f"process {pid} ended while its idle CPU was measured")
    return (after - before) / IDLE_WINDOW_S * 100


async def sleeping_python_cpu_pct() -> float:
    command = [sys.executable, "-c", f"import time; time.sleep({IDLE_WINDOW_S * 3})"]
    async with await anyio.open_process(command, stdin=subprocess.DEVNULL) as process:
        try:
            await anyio.sleep(1.0)  # past the interpreter's start-up
            return await idle_cpu_pct(process.pid)
        finally:
            process.kill()


async def timer_lateness_ms(n: int) -> list[float]:
    """How late a bare anyio.sleep wakes for wall-clock targets 10 ms apart."""
    samples = []
    for _ in range(n):
        target = time.time() + 0.01
        await anyio.sleep(target - time.time())
        samples.append((time.time() - target) * 1000)
    return samples


def instants(count: int, start: datetime, window_s: float) -> Iterator[tuple[int, datetime]]:
    step = window_s / count
    for i in range(count):
        yield i, start + timedelta(seconds=i * step)


async def create_entries(client: Client, slots: list[datetime]) -> None:
    """Create one-shot entries at ``slots`` with ``CREATORS`` concurrent tool calls."""
    todo = iter(slots)

    async def creator() -> None:
        for slot in todo:
            when = slot.astimezone(UTC).isoformat().replace("+00:00", "Z")
            result = await client.call_tool(
                "cron_create", {"schedule": f"once_at {when}", "prompt": "p"}, meta=META
            )
            if result.is_error:
                raise RuntimeError(f"cron_create refused an entry: {result.content}")

    async with anyio.create_task_group() as tg:
        for _ in range(CREATORS):
            tg.start_soon(creator)


async def collect_lateness(client: Client, expected: int, deadline: float) -> list[float]:
    """Pull and acknowledge cron_fire events until ``expected`` arrived; lateness of each in ms."""
    lateness: list[float] = []
    after = 0
    while len(lateness) < expected and time.time() < deadline:
        pulled = await client.session.send_request(
            PullRequest(params=PullParams(after=after, limit=500, wait_ms=1_000, kinds=["cron_fire"])),
            PullResult,
        )
        received = time.time()
        for event in pulled.events:
            due = datetime.fromisoformat(FirePayload.model_validate(event.payload).due_at).timestamp()
            lateness.append((received - due) * 1000)
            after = max(after, event.seq)
        if pulled.events:
            seqs = [event.seq for event in pulled.events]
            await client.session.send_request(AckRequest(params=AckParams(seqs=seqs)), AckResult)
    return lateness


async def creation_rate(client: Client, now: datetime) -> float:
    """Entries per second this client creates (warm-up entries, due long after the run)."""
    count = 2 * CREATORS * 10
    start = time.perf_counter()
    await create_entries(client, [now + timedelta(hours=2, seconds=i) for i in range(count)])
    return count / (time.perf_counter() - start)


async def _measure(quick: bool) -> list[Result]:
    window_s = 20.0 if quick else 60.0
    lateness = Result("cron fire lateness", "ms", LATENESS_BASELINE, target=TARGET_LATENESS_MS)
    p99 = Result("cron fire lateness p99", "ms", LATENESS_BASELINE, target=TARGET_LATENESS_MS)
    idle = Result("cron idle CPU (server process)", "% core", CPU_BASELINE, target=TARGET_IDLE_CPU_PCT)
    progress(f"cron: {TIMER_SAMPLES} wake-ups of a bare anyio.sleep timer (baseline)")
    lateness.baseline = await timer_lateness_ms(TIMER_SAMPLES)
    p99.baseline = [percentile(lateness.baseline, 0.99)]
    with workdir() as tmp:
        try:
            async with Client(server_params(tmp)) as client:
                [pid] = child_pids(os.getpid(), "servers.cron")
                rate = await creation_rate(client, datetime.now(UTC))
                start = datetime.now(UTC) + timedelta(seconds=ENTRIES / rate * 2 + LEAD_S)
                slots = [slot for _, slot in instants(ENTRIES, start, window_s)]
                progress(
                    f"cron: creating {ENTRIES:,} entries (~{rate:,.0f}/s), due over {window_s:.0f} s "
                    f"from {start:%H:%M:%S}"
                )
                await create_entries(client, slots)
                late_by = (datetime.now(UTC) - start).total_seconds()
                if late_by > 0:
                    raise RuntimeError(f"creating the entries took {late_by:.1f} s longer than planned")
                progress("cron: receiving the fires")
                deadline = start.timestamp() + window_s + DRAIN_GRACE_S
                lateness.samples = await collect_lateness(client, ENTRIES, deadline)
                if len(lateness.samples) < ENTRIES:
                    lateness.errors.append(f"only {len(lateness.samples)} of {ENTRIES} fires arrived")
                if lateness.samples:
                    p99.samples = [percentile(lateness.samples, 0.99)]
                progress(f"cron: idle CPU over {IDLE_WINDOW_S:.0f} s with entries due in an hour")
                later = datetime.now(UTC) + timedelta(hours=1)
                await create_entries(client, [later + timedelta(minutes=i) for i in range(IDLE_ENTRIES)])
                async with anyio.create_task_group() as tg:
                    tg.start_soon(
                        client.session.send_request,
                        PullRequest(params=PullParams(wait_ms=60_000, kinds=["cron_fire"])),
                        PullResult,
                    )
                    idle.samples = [await idle_cpu_pct(pid)]
                    tg.cancel_scope.cancel()
        except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
            lateness.errors.append(describe(exc))
    progress(f"cron: idle CPU of a sleeping python over {IDLE_WINDOW_S:.0f} s (baseline)")
    idle.baseline = [await sleeping_python_cpu_pct()]
    return [lateness, p99, idle]


def measure(quick: bool) -> list[Result]:
    return anyio.run(_measure, quick)


def main(argv: list[str] | None = None) -> int:
    return run_alone("cron", measure, argv)


if __name__ == "__main__":
    sys.exit(main())
