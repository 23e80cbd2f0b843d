"""Resident memory of the whole default mesh: ``nexo run`` plus every process it started.

Baseline: a bare Python process that has imported ``mcp`` (what each server costs at the least),
sampled the same way. The ratio reads as "the mesh weighs this many bare MCP processes".
"""

from __future__ import annotations

import subprocess
import sys
import time

from bench.mesh_run import MeshNotReady, default_mesh, scripted_model, workdir
from bench.stats import Result
from bench.support import describe, process_tree, progress, total_rss_mb
from tests.mesh.harness import stop

TARGET_MB = 500.0
SAMPLE_INTERVAL_S = 0.05
BARE_MCP = "import mcp, sys; print('imported', flush=True); sys.stdin.read()"
"""Imports, says so, then blocks on stdin until the bench closes it: no sleeping on either side."""


def _sample(pids: list[int], n: int) -> list[float]:
    samples = []
    for i in range(n):
        if i:
            time.sleep(SAMPLE_INTERVAL_S)
        samples.append(total_rss_mb(pids))
    return samples


def _bare_mcp(n: int) -> list[float]:
    process = subprocess.Popen(
        [sys.executable, "-c", BARE_MCP], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        assert process.stdin is not None
        line = process.stdout.readline()
        if line.strip() != "imported":
            raise RuntimeError(
                f"the bare mcp process exited with {process.wait(timeout=10)} before importing"
            )
        samples = _sample([process.pid], n)
        process.stdin.close()
        process.wait(timeout=10)
        return samples
    finally:
        stop(process)


def measure(quick: bool) -> list[Result]:
    n = 5 if quick else 10
    result = Result("mesh memory (RSS)", "MB", 'a bare python process after "import mcp"', target=TARGET_MB)
    progress(f"memory: {n} RSS samples of a bare python that imported mcp (baseline)")
    try:
        result.baseline = _bare_mcp(n)
    except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
        result.errors.append(f"baseline: {describe(exc)}")
    progress(f"memory: {n} RSS samples of nexo run and its servers (console, time, audit, memory)")
    with scripted_model() as fake, workdir() as tmp:
        try:
            with default_mesh(fake, tmp, "memory") as started:
                tree = process_tree(started.orchestrator.process.pid)
                progress(f"memory: {len(tree)} processes in the mesh")
                result.samples = _sample(tree, n)
        except MeshNotReady as exc:
            result.errors.append(str(exc))
    return [result]
