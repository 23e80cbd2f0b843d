"""What the tests of the platform channels share: recorded backoffs, pulling events, asking for
approval, and starting a channel as its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import CompletedProcess

import anyio
from mcp import Client

from shared.protocol.events import Event, PullParams, PullRequest, PullResult
from shared.protocol.permission_prompts import (
    PermissionPrompt,
    PermissionRequestAccepted,
    PermissionRequestCall,
)
from tests.mesh.harness import REPO


@dataclass
class Waits:
    """Every backoff the channel asked for, recorded instead of slept through; a test that needs the
    channel to stay paused sets ``hold`` and releases it."""

    seconds: list[float] = field(default_factory=list)
    hold: anyio.Event | None = None
    paused: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(self, delay: float) -> None:
        self.seconds.append(delay)
        self.paused.set()
        if self.hold is not None:
            await self.hold.wait()


async def pull(client: Client, after: int = 0, count: int = 1) -> list[Event]:
    """At least ``count`` events after ``after`` (each pull waits up to 5 s for one); with
    ``count=0``, what arrives within a short bounded wait (to show that nothing more came)."""
    events: list[Event] = []
    while True:
        request = PullRequest(params=PullParams(after=after, wait_ms=5000 if count else 200))
        batch = (await client.session.send_request(request, PullResult)).events
        events.extend(batch)
        if not batch or len(events) >= count:
            return events
        after = batch[-1].seq


async def ask(client: Client, request_id: str = "kmpqr") -> int:
    """Ask the channel to show a permission prompt (as the orchestrator does); how many showed it."""
    prompt = PermissionPrompt(
        request_id=request_id,
        tool_name="workspace__write_file",
        description="Write a file <notes.md> & more",
        input_preview='{"path": "notes.md"}',
    )
    accepted = await client.session.send_request(
        PermissionRequestCall(params=prompt), PermissionRequestAccepted
    )
    return accepted.delivered


async def start_alone(module: str, tmp_path: Path, env: dict[str, str]) -> CompletedProcess[bytes]:
    """``python -m module`` as its own process with only these ``NEXO_*`` variables; how it ended."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("NEXO_")}
    with anyio.fail_after(60):
        return await anyio.run_process(
            [sys.executable, "-m", module],
            env=clean | {"NEXO_STATE_DIR": str(tmp_path)} | env,
            cwd=REPO,
            check=False,
            stdin=subprocess.DEVNULL,
        )
