"""Warm console turns of two trees, measured in the same minutes: ``python -m bench.turn_ab OTHER``.

A small machine's pace changes by half within the hour, so two runs of ``--only turn_overhead`` one
after the other compare the machine's phases more than the code. This starts the default mesh of
this tree and of ``OTHER`` (a checkout of another revision with its own ``.venv``, for example a
``git worktree``) at the same time, each held by its own tree's interpreter, then sends console
turns to them in turns: ``--block`` turns to one, then to the other, for ``--rounds`` rounds, the
first tree of a round alternating. Each tree's turns then meet the same phases. It prints, per
tree, the p25 / p50 / p75 and mean of whole turns (message written to the console until its reply
is read, the scripted model's round trip included: the same in both), and the difference of the
medians. Idle, each mesh costs the other nothing but memory.

The other tree's mesh is started by code handed to its interpreter with ``-c``, which uses only
``default_mesh``, ``scripted_model`` and ``workdir`` of ``bench.mesh_run`` and ``console_path`` of
``orchestrator.sockets``, so an older revision that has them can be compared too.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path

import anyio

from bench.support import progress
from bench.turn_overhead import Console
from shared import unix_socket
from shared.protocol.console_wire import Hello, encode

HOLD = (
    "import sys\n"
    "from bench.mesh_run import default_mesh, scripted_model, workdir\n"
    "from orchestrator.sockets import console_path\n"
    "with scripted_model() as fake, workdir() as tmp, default_mesh(fake, tmp, 'ab') as started:\n"
    "    print(console_path(started.state_dir), flush=True)\n"
    "    sys.stdin.read()\n"
)
"""Started in each tree: its default mesh, held until stdin closes; its console socket on stdout."""
WARMUP_TURNS = 5
START_TIMEOUT_S = 120.0


def interpreter(tree: Path) -> Path:
    python = tree / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"bench.turn_ab: {python} is missing; run `make dev` in {tree} first")
    return python


@contextmanager
def held_mesh(tree: Path) -> Iterator[Path]:
    """``tree``'s default mesh, started by its own interpreter; the path of its console socket."""
    with subprocess.Popen(
        [str(interpreter(tree)), "-c", HOLD],
        cwd=tree,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as holder:
        assert holder.stdin is not None
        assert holder.stdout is not None
        try:
            line = holder.stdout.readline().strip()
            if not line:
                code = holder.wait()
                raise SystemExit(f"bench.turn_ab: the default mesh of {tree} did not start (exit {code})")
            yield Path(line)
        finally:
            holder.stdin.close()
            holder.wait(START_TIMEOUT_S)


async def alternate(sockets: dict[str, Path], rounds: int, block: int) -> dict[str, list[float]]:
    """Milliseconds of each tree's turns, sent ``block`` at a time to each tree in turn."""
    consoles: dict[str, Console] = {}
    async with AsyncExitStack() as stack:
        for name, path in sockets.items():
            stream = await stack.enter_async_context(await unix_socket.connect(path))
            console = Console(stream)
            await stream.send(encode(Hello(chat_id="bench")))
            for i in range(WARMUP_TURNS):
                await console.turn(f"warm up {i}")
            consoles[name] = console
        samples: dict[str, list[float]] = {name: [] for name in sockets}
        names = list(sockets)
        for r in range(rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                for i in range(block):
                    samples[name].append(await consoles[name].turn(f"what time is it? ({r}.{i})") * 1000)
    return samples


def summary(samples: dict[str, list[float]]) -> list[str]:
    lines, medians = [], []
    for name, values in samples.items():
        q1, median, q3 = statistics.quantiles(values, n=4)
        medians.append(median)
        lines.append(
            f"{name}: n={len(values)}  p25 {q1:.2f} ms  p50 {median:.2f} ms  p75 {q3:.2f} ms  "
            f"mean {statistics.fmean(values):.2f} ms"
        )
    lines.append(f"p50 difference (first - second): {medians[0] - medians[1]:+.2f} ms")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.turn_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("other", type=Path, help="the other tree (a checkout with its own .venv)")
    parser.add_argument("--rounds", type=int, default=30, help="rounds (default 30)")
    parser.add_argument("--block", type=int, default=10, help="turns to one tree at a time (default 10)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.block < 1:
        parser.error("--rounds and --block must be at least 1")
    here = Path(__file__).resolve().parents[1]
    trees = {f"this tree ({here})": here, f"other ({args.other.resolve()})": args.other.resolve()}
    for tree in trees.values():
        interpreter(tree)  # both, before either mesh starts
    with ExitStack() as stack:
        progress(f"turn_ab: starting the default mesh of {len(trees)} trees")
        sockets = {name: stack.enter_context(held_mesh(tree)) for name, tree in trees.items()}
        progress(f"turn_ab: {args.rounds} rounds of {args.block} turns to each tree in turn")
        samples = anyio.run(alternate, sockets, args.rounds, args.block)
    print("\n".join(summary(samples)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
