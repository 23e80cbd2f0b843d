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


_MAPPED_AFTER_A_LARGE_FREE = """
import ctypes, sys
from servers.memory import heap

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd",
        "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
if sys.argv[1] == "fixed":
    assert heap.keep_large_blocks_mapped()
large = bytearray(16 << 20)  # mapped, and freed: glibc raises its threshold to 16 MB
del large
before = libc.mallinfo2().hblkhd
block = bytearray(512 << 10)
print(libc.mallinfo2().hblkhd - before)
"""


@pytest.mark.parametrize(("threshold", "mapped"), [("fixed", True), ("glibc's own", False)])
def test_a_recalls_large_temporaries_stay_mapped_after_a_large_block_was_freed(
    threshold: str, mapped: bool
) -> None:
    """With glibc's moving threshold a 512 KB block after a freed 16 MB one came from the heap,
    whose pages stay resident; with the threshold fixed it is mapped, and unmapped when freed."""
    ran = subprocess.run(
        [sys.executable, "-c", _MAPPED_AFTER_A_LARGE_FREE, "fixed" if threshold == "fixed" else "moving"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
        check=True,
    )
    assert (int(ran.stdout) >= 512 << 10) is mapped


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
