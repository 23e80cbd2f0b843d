"""numpy's BLAS runs on one thread in the memory server: no threads spinning between products.

OpenBLAS gives a matrix product a thread per core and keeps them spinning after it; the memory
server's products are small and many (the int8 bounds of every recall), so that spinning cost more
CPU than the products (``servers/memory/__init__.py``). Checked in a fresh interpreter, as the
server starts: the package is imported before numpy, then products of a recall's size run, and the
process has no thread but its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

CHILD = """
import json, os

import servers.memory.vector_q8
import numpy as np

rng = np.random.default_rng(0)
q = rng.integers(-127, 128, size=(2_000, 384), dtype=np.int8)
query = rng.standard_normal(384).astype(np.float32)
left = rng.standard_normal((512, 384)).astype(np.float32)
right = rng.standard_normal((384, 64)).astype(np.float32)
for _ in range(20):
    (q.astype(np.float32) @ query).sum()
    (left @ right).sum()
threads = len(os.listdir("/proc/self/task"))
print(json.dumps({"threads": threads, "env": os.environ.get("OPENBLAS_NUM_THREADS")}))
"""


def _child(env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_memory_server_keeps_numpy_blas_on_its_own_thread() -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_NUM_THREADS"}
    assert _child(env) == {"threads": 1, "env": "1"}


def test_an_operators_own_blas_setting_stays() -> None:
    assert _child({**os.environ, "OPENBLAS_NUM_THREADS": "2"})["env"] == "2"
