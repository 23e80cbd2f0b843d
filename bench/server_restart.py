"""A built-in server killed and restarted by the mesh: from SIGKILL to its next tool result.

Measured with the fork server (the restart is a fork of the preloaded template) against the
baseline of the same mesh with ``fork_server`` off (the restart spawns a fresh interpreter that
imports everything again).
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import anyio

from bench.stats import Result
from bench.support import describe, progress
from orchestrator.mesh import Mesh, ServerUnavailable, StdioServerConfig, SupervisionConfig
from tests.mesh.harness import child_pids

MODULE = "servers.time"
NEIGHBOUR = "servers.pairing"
"""A second built-in server: a mesh forks from the template only when two or more share it."""
SUPERVISION = SupervisionConfig(initial_backoff_s=0.01, max_backoff_s=0.01, stable_after_s=0.01)
"""Restart at once: the figure is the restart itself, not the backoff before it."""
READY_S = 120.0


async def _restarts(fork: bool, n: int, state: Path) -> list[float]:
    servers = {
        name: StdioServerConfig(transport="stdio", command=sys.executable, args=["-m", module])
        for name, module in (("time", MODULE), ("pairing", NEIGHBOUR))
    }
    env = {"NEXO_STATE_DIR": str(state)}
    samples = []
    async with Mesh(servers, SUPERVISION, base_env=env, fork_server=fork) as mesh:
        if await mesh.wait_ready(READY_S):
            raise ServerUnavailable(f"the servers were not ready within {READY_S:g}s")
        connection = mesh["time"]
        for _ in range(n):
            [pid] = child_pids(os.getpid(), MODULE)
            started = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            await connection.wait_closed()
            await connection.call_tool("now", {"timezone_name": "UTC"}, timeout=READY_S)
            samples.append(time.perf_counter() - started)
    return samples


def measure(quick: bool) -> list[Result]:
    n = 5 if quick else 15
    result = Result("built-in server restart", "s", "the same, fork_server off (a fresh spawn)")
    for fork in (True, False):
        how = "forked" if fork else "spawned"
        progress(f"server_restart: {n} restarts of the time server, {how}")
        with tempfile.TemporaryDirectory(prefix="nexo-bench-") as tmp:
            try:
                samples = anyio.run(_restarts, fork, n, Path(tmp))
            except (ServerUnavailable, OSError, ValueError) as exc:
                result.errors.append(f"{how}: {describe(exc)}")
                continue
        if fork:
            result.samples = samples
        else:
            result.baseline = samples
    return [result]
