"""CPU per warm console turn, process by process, on the real default mesh.

``python -m bench.turn_cpu [--quick]``. A warm turn is CPU-bound across the mesh's processes on a
small machine, so what each process spends on it bounds how fast turns can come. The bench starts
the default mesh (``nexo run`` with the scripted model), sends warm-up turns through the console
socket as the turn overhead row does, reads each process's CPU time from ``/proc/PID/stat`` (user
plus system), sends the measured turns back to back, reads them again and divides by the turns.

Rows: the whole mesh's CPU per turn against the turn's wall time (both in ms, per round), then each
process that spent any, named by its server. Processes are found from ``nexo run`` down (the
template and every server it forked or spawned).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio

from bench.mesh_run import MeshNotReady, default_mesh, scripted_model, workdir
from bench.stats import Result, percentile, run_alone
from bench.support import describe, progress
from bench.turn_overhead import Console
from orchestrator.sockets import console_path
from shared.protocol.console_wire import Hello, encode

WARMUP_TURNS = 5
TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def descendants(root: int) -> set[int]:
    """``root`` and every process below it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(_stat(int(entry.name))[1])
            except (OSError, IndexError, ValueError):
                continue  # ended meanwhile
    found = {root}
    while True:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        if not more:
            return found
        found |= more


def process_name(pid: int) -> str:
    """The server a process runs (``servers.audit`` -> ``audit``), else ``orchestrator``."""
    words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    for word in words:
        if word.startswith((b"servers.", b"channel_servers.", b"shared.")):
            return word.decode().rsplit(".", 1)[-1]
    return "orchestrator"


def cpu_ms(pids: set[int]) -> dict[int, tuple[str, float]]:
    """Each live process's name and CPU time so far (user + system), in ms."""
    seen = {}
    for pid in pids:
        try:
            fields = _stat(pid)
            seen[pid] = (process_name(pid), (int(fields[11]) + int(fields[12])) * 1000 / TICKS)
        except (OSError, IndexError, ValueError):
            continue
    return seen


async def _rounds(
    path: Path, pids: set[int], rounds: int, turns: int
) -> list[tuple[float, dict[str, float]]]:
    """Per round: the turns' median wall time (ms) and each process's CPU per turn (ms)."""
    stream = await anyio.connect_unix(path)
    measured = []
    async with stream:
        console = Console(stream)
        await stream.send(encode(Hello(chat_id="bench")))
        for i in range(WARMUP_TURNS):
            await console.turn(f"warm up {i}")
        for round_ in range(rounds):
            progress(f"turn cpu: round {round_ + 1} of {rounds}, {turns} turns")
            before = cpu_ms(pids)
            walls = [await console.turn(f"what time is it? ({round_}.{i})") for i in range(turns)]
            after = cpu_ms(pids)
            spent: dict[str, float] = {}
            for pid, (name, total) in after.items():
                if pid in before:
                    spent[name] = spent.get(name, 0.0) + (total - before[pid][1]) / turns
            measured.append((percentile(walls, 0.5) * 1000, spent))
    return measured


def measure(quick: bool) -> list[Result]:
    rounds, turns = (2, 40) if quick else (5, 80)
    total = Result("turn CPU, whole mesh, per warm turn", "ms", "the turn's wall time (p50 of the round)")
    with scripted_model() as fake, workdir() as tmp:
        progress(f"turn cpu: {rounds} rounds of {turns} console turns through the default mesh")
        try:
            with default_mesh(fake, tmp, "turn-cpu") as started:
                pids = descendants(started.orchestrator.process.pid)
                measured = anyio.run(_rounds, console_path(started.state_dir), pids, rounds, turns)
        except (MeshNotReady, OSError, TimeoutError, RuntimeError) as exc:
            total.errors.append(describe(exc))
            return [total]
    names = sorted({name for _, spent in measured for name in spent})
    rows = {name: Result(f"turn CPU, {name}, per warm turn", "ms", "the whole mesh") for name in names}
    for wall, spent in measured:
        whole = sum(spent.values())
        total.samples.append(whole)
        total.baseline.append(wall)
        for name, row in rows.items():
            row.samples.append(spent.get(name, 0.0))
            row.baseline.append(whole)
    busy = [row for row in rows.values() if max(row.samples) > 0]
    return [total, *sorted(busy, key=lambda row: -percentile(row.samples, 0.5))]


def main(argv: list[str] | None = None) -> int:
    return run_alone("turn_cpu", measure, argv)


if __name__ == "__main__":
    sys.exit(main())
