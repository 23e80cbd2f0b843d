"""CPU per warm console turn, process by process, on the real default mesh.

``python -m bench.turn_cpu [--quick]``. A warm turn is CPU-bound across the mesh's processes on a
small machine, so what each process spends on it bounds how fast turns can come. The bench starts
the default mesh (``nexo run`` with the scripted model), sends warm-up turns through the console
socket as the turn overhead row does, reads each process's CPU time from ``/proc/PID/stat`` (user
plus system), sends the measured turns back to back, reads them again and divides by the turns.

Rows: the whole mesh's CPU per turn against the turn's wall time (both in ms, per round), then each
process that spent any, labelled as the memory row labels them (``bench.memory.process_label``).
Processes are found from ``nexo run`` down (``bench.support.process_tree``: the template and every
server it forked or spawned).
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from bench.memory import process_label
from bench.mesh_run import MeshNotReady, default_mesh, default_servers, scripted_model, workdir
from bench.stats import Result, percentile, run_alone
from bench.support import cpu_seconds, describe, process_tree, progress
from bench.turn_overhead import Console
from orchestrator.sockets import console_path
from shared import unix_socket
from shared.protocol.console_wire import Hello, encode

WARMUP_TURNS = 5


def cpu_ms(labels: dict[int, str]) -> dict[int, tuple[str, float]]:
    """Each live process's label and CPU time so far (user + system), in ms; one that ended is left out."""
    seen = {}
    for pid, label in labels.items():
        spent = cpu_seconds(pid)
        if spent is not None:
            seen[pid] = (label, spent * 1000)
    return seen


async def _rounds(
    path: Path, labels: dict[int, str], rounds: int, turns: int
) -> list[tuple[float, dict[str, float]]]:
    """Per round: the turns' median wall time (ms) and each process's CPU per turn (ms)."""
    stream = await unix_socket.connect(path)
    measured = []
    async with stream:
        console = Console(stream)
        await stream.send(encode(Hello(chat_id="bench")))
        for i in range(WARMUP_TURNS):
            await console.turn(f"warm up {i}")
        for round_ in range(rounds):
            progress(f"turn cpu: round {round_ + 1} of {rounds}, {turns} turns")
            before = cpu_ms(labels)
            walls = [await console.turn(f"what time is it? ({round_}.{i})") for i in range(turns)]
            after = cpu_ms(labels)
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
                root = started.orchestrator.process.pid
                labels = {pid: process_label(pid, root, default_servers()) for pid in process_tree(root)}
                measured = anyio.run(_rounds, console_path(started.state_dir), labels, rounds, turns)
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
