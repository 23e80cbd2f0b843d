"""The memory server hands freed heap back to the system after its bursts of short-lived
allocations: building the codes, writing the int8 copies' files, a large consolidation pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import anyio.from_thread
import numpy as np
import pytest

from servers.memory import heap, service, vector_cache
from servers.memory.embeddings import Embedder
from servers.memory.settings import MemorySettings
from servers.memory.state import MIGRATIONS, open_service
from servers.memory.vectors import VectorIndex
from shared.db import Database
from shared.protocol.memory.records import ImportRecord
from tests.servers.memory.conftest import Clock

pytestmark = pytest.mark.anyio

DIM = 16
WAIT_S = 10.0


def test_handing_the_heap_back_works_here() -> None:
    heap.return_memory_to_the_system()  # glibc here; a no-op where there is no libc.so.6


_AFTER_A_LARGE_FREE = """
import ctypes, sys
from servers.memory import heap

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd",
        "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
if sys.argv[1] == "ours":
    assert heap.keep_the_heap_small()
large = bytearray(16 << 20)  # mapped, and freed: glibc's own thresholds rise to 16 and 32 MB
del large
before = libc.mallinfo2().hblkhd
block = bytearray(6 << 20)
mapped = libc.mallinfo2().hblkhd - before
del block
blocks = [bytearray(1 << 20) for _ in range(10)]
del blocks
print(mapped, libc.mallinfo2().keepcost)
"""


@pytest.mark.parametrize("settings", ["ours", "glibc's own"])
def test_the_heap_keeps_little_of_what_a_recalls_large_temporaries_freed(settings: str) -> None:
    """After a freed 16 MB block, glibc's own thresholds took a 6 MB block from the heap and kept
    10 MB freed at its top; with the server's settings the block is mapped (and unmapped when
    freed) and at most 2 MB stay at the top."""
    ran = subprocess.run(
        [sys.executable, "-c", _AFTER_A_LARGE_FREE, "ours" if settings == "ours" else "glibc"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
        check=True,
    )
    mapped, kept_at_top = (int(word) for word in ran.stdout.split())
    if settings == "ours":
        assert mapped >= 6 << 20
        assert kept_at_top <= 2 << 20
    else:
        assert mapped == 0
        assert kept_at_top >= 8 << 20


async def test_building_the_codes_and_their_files_hands_the_heap_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trims: list[str] = []
    filed = anyio.Event()

    def trim() -> None:
        trims.append("trim")
        if len(trims) == 2:
            anyio.from_thread.run_sync(filed.set)  # called on a worker thread, as the real one is

    monkeypatch.setattr(vector_cache, "return_memory_to_the_system", trim)
    rng = np.random.default_rng(1)
    async with Database.open(tmp_path / "memory.db", MIGRATIONS, load_vec=True) as db:
        index = VectorIndex(db, DIM)
        async with db.transaction() as tx:
            await index.add_many(tx, [(i, "nexo", rng.standard_normal(DIM)) for i in range(1, 51)])
        await index.load()
        assert trims == ["trim"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(index.keep_filed)
            with anyio.fail_after(WAIT_S):
                await filed.wait()
            tg.cancel_scope.cancel()
        assert index.filed("nexo") == (50, 50)
    assert trims == ["trim", "trim"]


async def test_a_large_consolidation_pass_hands_the_heap_back_and_a_small_one_does_not(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    trims: list[str] = []
    monkeypatch.setattr(service, "return_memory_to_the_system", lambda: trims.append("trim"))
    settings = MemorySettings(state_dir=tmp_path / "state")
    records = [ImportRecord(agent="nexo", content=f"the shed holds item number {i}") for i in range(12)]
    async with open_service(settings, embedder=embedder, clock=Clock()) as memory:
        await memory.import_records(records)
        await memory.consolidate("nexo")
        assert trims == []
        monkeypatch.setattr(service, "TRIM_AFTER_SCORED", 10)
        await memory.consolidate("nexo")
    assert trims == ["trim"]
