"""Latency of one tool call through the mesh, over stdio and over HTTP in both protocol eras.

The stdio row's baseline is the same tool called in-process on the server object, timed the same
way, so its ratio is what the transport, the MCP session and the connection's supervision add to the
tool's own work. The HTTP rows' baseline is the stdio row of the same run: HTTP should cost at most
twice what stdio does (a response that waits for a delayed ACK shows here as ~40 ms). The three
transports are connected at once and called in turns, ten calls each per turn, so a change of the
machine's pace during the run (this 2-core machine's varies up to 1.7x within the hour) weighs on
the stdio figure and the HTTP ones alike instead of on whichever ran then.
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

from pydantic import SecretStr

from bench.stats import Result
from bench.support import (
    CHILD_ENV,
    FAST_SUPERVISION,
    collector_frozen,
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
    with collector_frozen():  # as the daemon's start is (orchestrator.gc_pause)
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


STDIO = "stdio"
BLOCK = 10
"""Calls made back to back through one transport before the next transport's turn. One call each
in turns would time every call on a server that sat idle through the other transports' calls, the
stdio server twice as long as the HTTP one (which serves both eras): that measured waking idle
processes, unevenly."""


async def _open(stack: AsyncExitStack, name: str, mesh: Mesh) -> tuple[Call | None, str | None]:
    """``mesh`` entered on ``stack`` and its time server checked: the call to time, or why not."""
    await stack.enter_async_context(mesh)
    problem = await connect(mesh, "time")
    if problem is not None:
        return None, f"{name}: {problem}"
    connection = mesh["time"]

    async def call() -> Any:
        return await connection.call_tool(TOOL, ARGUMENTS)

    problem = await _checked(call)
    return (None, f"{name}: {problem}") if problem is not None else (call, None)


async def _interleaved(calls: dict[str, Call], n: int, warmup: int) -> dict[str, list[float]]:
    """``n`` timed calls through each transport, in blocks of ``BLOCK`` back-to-back calls taken in
    turns (each round starting with the next transport), so a change of the machine's pace during
    the run falls on all of them alike, and each server waits between its blocks alike."""
    for call in calls.values():
        for _ in range(warmup):
            await call()
    names = list(calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    with collector_frozen():  # this process is the daemon's mesh, whose start is frozen too
        for round_, first in enumerate(range(0, n, BLOCK)):
            for offset in range(len(names)):
                name = names[(round_ + offset) % len(names)]
                for _ in range(min(BLOCK, n - first)):
                    start = time.perf_counter()
                    await calls[name]()
                    samples[name].append((time.perf_counter() - start) * 1000)
    return samples


async def through_meshes(n: int, warmup: int) -> dict[str, tuple[list[float], str | None]]:
    """The time server called through the mesh over stdio and, as ``nexo serve time --http``, over
    HTTP in each protocol era: all connected at once and called in turns (:func:`_interleaved`)."""
    port, token = free_port(), secrets.token_urlsafe(24)
    argv = nexo_argv("serve", "time", "--http", f"127.0.0.1:{port}")
    env = base_env({"NEXO_SERVER_TOKEN": token, **CHILD_ENV})
    found: dict[str, tuple[list[float], str | None]] = {}
    calls: dict[str, Call] = {}
    with spawned(argv, env) as (process, log):
        async with AsyncExitStack() as stack:
            stdio = StdioServerConfig(transport="stdio", command=sys.executable, args=["-m", "servers.time"])
            call, problem = await _open(
                stack, "stdio", Mesh({"time": stdio}, FAST_SUPERVISION, base_env=CHILD_ENV)
            )
            if call is None:
                found[STDIO] = ([], problem)
            else:
                calls[STDIO] = call
            problem = wait_for_port(process, port, HTTP_START_TIMEOUT_S)
            for era, _ in ERAS:
                if problem is not None:
                    found[era] = ([], f"`nexo serve time --http` {problem}: {tail(log)}")
                    continue
                config = HttpServerConfig(
                    transport="http", url=f"http://127.0.0.1:{port}/mcp", token=SecretStr(token), protocol=era
                )
                call, failed = await _open(stack, era, Mesh({"time": config}, FAST_SUPERVISION))
                if call is None:
                    found[era] = ([], f"{failed}; server log: {tail(log)}")
                else:
                    calls[era] = call
            for name, samples in (await _interleaved(calls, n, warmup)).items():
                found[name] = (samples, None)
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
    progress(f"tool call: {n} calls of time.{TOOL} through the mesh over stdio and over HTTP, in turns")
    try:
        meshes = await through_meshes(n, warmup)
    except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
        meshes = {name: ([], describe(exc)) for name in (STDIO, *(era for era, _ in ERAS))}
    stdio.samples, problem = meshes[STDIO]
    if problem is not None:
        stdio.errors.append(problem)
    eras = {era: meshes[era] for era, _ in ERAS}
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
