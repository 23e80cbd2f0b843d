"""Latency of one tool call through the mesh, over stdio and over HTTP in both protocol eras.

The stdio row's baseline is the same tool called in-process on the server object, timed the same
way, so its ratio is what the transport, the MCP session and the connection's supervision add to the
tool's own work. The HTTP rows' baseline is the stdio row of the same run: HTTP should cost at most
twice what stdio does (a response that waits for a delayed ACK shows here as ~40 ms).
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import SecretStr

from bench.stats import Result
from bench.support import (
    CHILD_ENV,
    FAST_SUPERVISION,
    connect,
    describe,
    progress,
    spawned,
    tail,
    wait_for_port,
)
from orchestrator.mesh import HttpServerConfig, Mesh, StdioServerConfig
from orchestrator.mesh.config import Protocol
from servers.time.server import build_server
from servers.time.settings import TimeSettings
from tests.mesh.harness import base_env, free_port, nexo_argv

TOOL = "now"
ARGUMENTS: dict[str, Any] = {"timezone_name": "Europe/Madrid"}
HTTP_START_TIMEOUT_S = 20.0
HTTP_VS_STDIO = 2.0
"""Target: a tool call over HTTP takes at most this many times the stdio call of the same run."""
ERAS: tuple[tuple[Protocol, str], ...] = (("auto", "2026-07-28"), ("legacy", "2025-11-25 handshake"))

Call = Callable[[], Awaitable[Any]]


async def _timed(call: Call, n: int, warmup: int) -> list[float]:
    """Milliseconds of ``n`` sequential calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        await call()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def _checked(call: Call) -> str | None:
    """Call once: None when the tool answered normally, else what went wrong."""
    try:
        result = await call()
    except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
        return f"{TOOL} raised {type(exc).__name__}: {exc}"
    if getattr(result, "is_error", False):
        return f"{TOOL} returned an error: {result}"
    return None


async def in_process(n: int, warmup: int) -> tuple[list[float], str | None]:
    server = build_server(TimeSettings())

    async def call() -> Any:
        return await server.call_tool(TOOL, dict(ARGUMENTS))

    problem = await _checked(call)
    if problem is not None:
        return [], f"in-process baseline: {problem}"
    return await _timed(call, n, warmup), None


async def _through_mesh(mesh: Mesh, n: int, warmup: int) -> tuple[list[float], str | None]:
    async with mesh:
        problem = await connect(mesh, "time")
        if problem is not None:
            return [], problem
        connection = mesh["time"]

        async def call() -> Any:
            return await connection.call_tool(TOOL, ARGUMENTS)

        problem = await _checked(call)
        if problem is not None:
            return [], problem
        return await _timed(call, n, warmup), None


async def over_stdio(n: int, warmup: int) -> tuple[list[float], str | None]:
    config = StdioServerConfig(transport="stdio", command=sys.executable, args=["-m", "servers.time"])
    mesh = Mesh({"time": config}, FAST_SUPERVISION, base_env=CHILD_ENV)
    return await _through_mesh(mesh, n, warmup)


async def over_http(n: int, warmup: int) -> dict[Protocol, tuple[list[float], str | None]]:
    """One ``nexo serve time --http`` server, called through the mesh in each protocol era."""
    port, token = free_port(), secrets.token_urlsafe(24)
    argv = nexo_argv("serve", "time", "--http", f"127.0.0.1:{port}")
    env = base_env({"NEXO_SERVER_TOKEN": token, **CHILD_ENV})
    found: dict[Protocol, tuple[list[float], str | None]] = {}
    with spawned(argv, env) as (process, log):
        problem = wait_for_port(process, port, HTTP_START_TIMEOUT_S)
        if problem is not None:
            return {era: ([], f"`nexo serve time --http` {problem}: {tail(log)}") for era, _ in ERAS}
        for era, _ in ERAS:
            config = HttpServerConfig(
                transport="http",
                url=f"http://127.0.0.1:{port}/mcp",
                token=SecretStr(token),
                protocol=era,
            )
            mesh = Mesh({"time": config}, FAST_SUPERVISION)
            samples, problem = await _through_mesh(mesh, n, warmup)
            if problem is not None:
                problem = f"{problem}; server log: {tail(log)}"
            found[era] = (samples, problem)
    return found


async def measure(quick: bool) -> list[Result]:
    n = 50 if quick else 300
    warmup = max(5, n // 20)
    baseline_name = f"an in-process call of the same tool ({TOOL})"
    progress(f"tool call: {n} in-process calls of {TOOL} (baseline)")
    try:
        baseline, base_problem = await in_process(n, warmup)
    except Exception as exc:  # noqa: BLE001 -- the mesh rows are still worth measuring
        baseline, base_problem = [], f"in-process baseline: {describe(exc)}"
    stdio = Result("tool call, stdio", "ms", baseline_name, baseline=baseline)
    if base_problem is not None:
        stdio.errors.append(base_problem)
    progress(f"tool call: {n} calls of time.{TOOL} through the mesh over stdio")
    try:
        stdio.samples, problem = await over_stdio(n, warmup)
    except Exception as exc:  # noqa: BLE001 -- one broken transport must not hide the other figures
        problem = describe(exc)
    if problem is not None:
        stdio.errors.append(problem)
    progress(f"tool call: {n} calls of time.{TOOL} through the mesh over HTTP, in each protocol era")
    try:
        eras = await over_http(n, warmup)
    except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
        eras = {era: ([], describe(exc)) for era, _ in ERAS}
    results = [stdio]
    for era, label in ERAS:
        samples, problem = eras[era]
        http = Result(
            f"tool call, http ({label})",
            "ms",
            "the stdio tool call of the same run",
            samples=samples,
            baseline=list(stdio.samples),
            relative_target=(HTTP_VS_STDIO, 0.0),
        )
        if problem is not None:
            http.errors.append(problem)
        if not stdio.samples:
            http.errors.append("no stdio figure to compare with (see the stdio row)")
        results.append(http)
    return results
