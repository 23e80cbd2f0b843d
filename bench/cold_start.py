"""Mesh cold start: from spawning ``nexo run`` to its ready line (every server connected).

Baseline: spawn-to-exit of ``python -c "import mcp"``, the import every server and the orchestrator
pay before they can do anything.
"""

from __future__ import annotations

import subprocess
import sys
import time

from bench.mesh_run import MeshNotReady, default_mesh, scripted_model, workdir
from bench.stats import Result
from bench.support import describe, progress

TARGET_S = 5.0
IMPORT_TIMEOUT_S = 60.0


def _import_mcp() -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import mcp"],
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        timeout=IMPORT_TIMEOUT_S,
    )
    return time.perf_counter() - start


def measure(quick: bool) -> list[Result]:
    n = 1 if quick else 3
    result = Result("cold start", "s", 'spawn-to-exit of python -c "import mcp"', target=TARGET_S)
    progress(f"cold start: {n} x python -c 'import mcp' (baseline)")
    try:
        result.baseline = [_import_mcp() for _ in range(n)]
    except (OSError, subprocess.SubprocessError) as exc:
        result.errors.append(f"baseline: {describe(exc)}")
    with scripted_model() as fake, workdir() as tmp:
        for i in range(n):
            progress(f"cold start: nexo run with the default servers ({i + 1}/{n})")
            try:
                with default_mesh(fake, tmp, f"cold-{i}") as started:
                    result.samples.append(started.elapsed_s)
            except MeshNotReady as exc:
                result.errors.append(str(exc))
                break  # the next start would fail the same way and only add its timeout to the run
    return [result]
