"""``nexo mcp-server`` start: from spawning it (stdio, read tier, the built-in config, no daemon) to
its first ``tools/list`` answer, as an MCP client that launches it (Claude Desktop, Claude Code) waits.

Baseline, measured in the same run: ``nexo serve time``, one built-in server, spawned and asked the
same way. Both go through the SDK client over stdio.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.mesh_run import workdir
from bench.stats import Result
from bench.support import describe, progress
from tests.mesh.harness import REPO, base_env, nexo_argv

RELATIVE_TARGET = (1.5, 0.3)
"""Target: at most 1.5x a lone built-in server + 300 ms (it reads the config and builds its catalog)."""
START_TIMEOUT_S = 60.0


async def _first_list(state: Path, *args: str) -> float:
    argv = nexo_argv(*args)
    env = base_env({"NEXO_STATE_DIR": str(state)})
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(REPO))
    start = time.perf_counter()
    with anyio.fail_after(START_TIMEOUT_S):
        async with Client(stdio_client(params)) as client:
            await client.list_tools()
            return time.perf_counter() - start


def measure(quick: bool) -> list[Result]:
    n = 1 if quick else 3
    result = Result(
        "mcp-server start to tools/list",
        "s",
        "nexo serve time, spawn to tools/list",
        relative_target=RELATIVE_TARGET,
    )
    with workdir() as tmp:
        for i in range(n):
            progress(f"mcp-server start: nexo serve time, then nexo mcp-server ({i + 1}/{n})")
            try:
                result.baseline.append(anyio.run(_first_list, tmp, "serve", "time"))
                result.samples.append(anyio.run(_first_list, tmp, "mcp-server"))
            except (OSError, TimeoutError) as exc:
                result.errors.append(describe(exc))
                break
    return [result]
