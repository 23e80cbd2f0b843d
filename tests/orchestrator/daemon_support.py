"""The daemon run inside the test process, for tests that call its control socket or its tools."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from orchestrator.daemon.orchestrator import Orchestrator


@asynccontextmanager
async def daemon_in_process(orch: Orchestrator, wait_s: float) -> AsyncIterator[Orchestrator]:
    """``orch.run()`` until the block ends; yields once every server is up (within ``wait_s``). When
    the block ends, ``run`` returns as after SIGTERM, closing its servers and model clients."""
    ready, finished = anyio.Event(), anyio.Event()

    async def on_ready(_: Orchestrator) -> None:
        ready.set()
        await finished.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: orch.run(on_ready=on_ready))
        with anyio.fail_after(wait_s):
            await ready.wait()
        try:
            yield orch
        finally:
            finished.set()
