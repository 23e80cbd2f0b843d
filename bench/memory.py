"""Memory of the real default mesh: ``nexo run`` with every server of ``orchestrator/defaults.yaml``.

Three figures per process, from ``/proc/PID/smaps_rollup``: RSS (resident; counts a shared page in
every process that maps it), PSS (each shared page split among its sharers: what the mesh really
costs the machine) and USS (private pages: what stopping that process frees). Taken idle and again
after one recall (the memory server then holds its embedding model), with the fork server (the
default: built-in servers forked from one preloaded template) and without it (``fork_server:
false``, every server its own interpreter). The "without" run is the baseline column, so each
ratio reads as what the fork server changes.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.mesh_run import MeshNotReady, default_servers, workdir
from bench.stats import Result
from bench.support import process_tree, progress
from tests.fakes.llm import CallTool, FakeLLM, Reply
from tests.mesh.harness import FORK_SERVER, Orchestrator, chat, python_server, running, write_config

TARGET_IDLE_PSS_MB = 250.0
TARGET_LOADED_PSS_MB = 400.0
TARGET_SERVER_USS_MB = 25.0
"""What each built-in server may add beyond the shared template."""
SAMPLE_INTERVAL_S = 0.05
READY_TIMEOUT_S = 120.0
"""Generous: this row measures memory, and a busy machine can take long to start eight processes."""
ORCHESTRATOR = "orchestrator"
TEMPLATE = "fork server"
RECALL = CallTool("memory__memory_recall", {"query": "when is Ana's birthday"})


@dataclass(frozen=True, slots=True)
class Footprint:
    rss: float
    pss: float
    uss: float
    """All three in MB."""


def footprint(pid: int) -> Footprint | None:
    """RSS, PSS and USS of one process; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    kb: dict[str, int] = {}
    for line in text.splitlines()[1:]:
        key, _, rest = line.partition(":")
        if rest.strip().endswith("kB"):
            kb[key] = int(rest.split()[0])
    return Footprint(
        rss=kb.get("Rss", 0) / 1024,
        pss=kb.get("Pss", 0) / 1024,
        uss=(kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0)) / 1024,
    )


def process_label(pid: int, root: int, modules: dict[str, str]) -> str:
    """What a process of the mesh below ``root`` runs: the orchestrator, the fork server, or the
    server (by name) whose module its command line names."""
    if pid == root:
        return ORCHESTRATOR
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return f"pid {pid}"
    if FORK_SERVER in cmdline:
        return TEMPLATE
    for name, module in modules.items():
        if f"-m {module}" in cmdline:
            return name
    return cmdline.strip()[:40]


@dataclass
class Phase:
    """Samples of every process of the mesh at one moment of its life."""

    per_process: dict[str, list[Footprint]] = field(default_factory=lambda: defaultdict(list))
    totals: list[Footprint] = field(default_factory=list)

    def take(self, labels: dict[int, str], n: int) -> None:
        for i in range(n):
            if i:
                time.sleep(SAMPLE_INTERVAL_S)
            found = {labels[pid]: fp for pid in labels if (fp := footprint(pid)) is not None}
            for label, fp in found.items():
                self.per_process[label].append(fp)
            self.totals.append(
                Footprint(
                    rss=sum(f.rss for f in found.values()),
                    pss=sum(f.pss for f in found.values()),
                    uss=sum(f.uss for f in found.values()),
                )
            )

    def describe(self, title: str) -> None:
        progress(f"memory: {title} (median of each, MB)")
        for label, samples in sorted(self.per_process.items()):
            mid = samples[len(samples) // 2]
            progress(f"memory:   {label:<14} RSS {mid.rss:7.1f}  PSS {mid.pss:7.1f}  USS {mid.uss:7.1f}")
        if self.totals:
            mid = self.totals[len(self.totals) // 2]
            progress(f"memory:   {'in all':<14} RSS {mid.rss:7.1f}  PSS {mid.pss:7.1f}  USS {mid.uss:7.1f}")


@dataclass
class Run:
    idle: Phase = field(default_factory=Phase)
    loaded: Phase = field(default_factory=Phase)
    errors: list[str] = field(default_factory=list)


@contextmanager
def _mesh(
    fake: FakeLLM, tmp: Path, *, fork: bool, modules: dict[str, str]
) -> Iterator[tuple[Orchestrator, Path]]:
    label = "forked" if fork else "spawned"
    config = write_config(
        tmp / f"{label}.yaml",
        state_dir=tmp / f"state-{label}",
        llm_base_url=fake.openai_base_url,
        servers={name: python_server(module) for name, module in modules.items()},
        extra={"fork_server": fork},
    )
    try:
        with running(config, timeout=READY_TIMEOUT_S) as orch:
            missing = [line for line in orch.lines if "is not ready yet" in line]
            if missing:
                raise MeshNotReady(f"servers missing at the ready line: {' / '.join(missing)[:300]}")
            yield orch, config
    except AssertionError as exc:
        log = str(exc).partition("\n")[2].strip().splitlines()
        raise MeshNotReady(f"no ready line within {READY_TIMEOUT_S:g}s: {' / '.join(log[-4:])}") from exc


def _measure_run(fork: bool, n: int, modules: dict[str, str]) -> Run:
    run = Run()
    how = "with the fork server" if fork else "every server spawned"
    with FakeLLM([RECALL, Reply("noted")], default=Reply("ok")) as fake, workdir() as tmp:
        try:
            with _mesh(fake, tmp, fork=fork, modules=modules) as (orch, config):
                root = orch.process.pid
                labels = {pid: process_label(pid, root, modules) for pid in process_tree(root)}
                progress(f"memory: {how}: {len(labels)} processes, {n} samples idle")
                run.idle.take(labels, n)
                run.idle.describe(f"{how}, idle")
                answer = chat(config, "when is Ana's birthday?")
                outcomes = [result for request in fake.requests for result in request.tool_results]
                if answer.returncode != 0 or not outcomes or outcomes[-1][2]:
                    run.errors.append(f"{how}: the recall turn failed: {answer.stderr.strip()[-300:]}")
                run.loaded.take(labels, n)
                run.loaded.describe(f"{how}, after one recall (embedding model loaded)")
        except MeshNotReady as exc:
            run.errors.append(f"{how}: {exc}")
    return run


def _row(name: str, target: float | None, forked: list[float], spawned: list[float]) -> Result:
    return Result(
        name, "MB", "the same, every server spawned", samples=forked, baseline=spawned, target=target
    )


def measure(quick: bool) -> list[Result]:
    n = 5 if quick else 10
    modules = default_servers()
    forked = _measure_run(True, n, modules)
    spawned = _measure_run(False, n, modules)
    results: list[Result] = []
    for phase, title, pss_target in (
        ("idle", "idle", TARGET_IDLE_PSS_MB),
        ("loaded", "model loaded", TARGET_LOADED_PSS_MB),
    ):
        ours: Phase = getattr(forked, phase)
        base: Phase = getattr(spawned, phase)
        for metric in ("pss", "uss", "rss"):
            results.append(
                _row(
                    f"mesh {metric.upper()}, {title}",
                    pss_target if metric == "pss" else None,
                    [getattr(f, metric) for f in ours.totals],
                    [getattr(f, metric) for f in base.totals],
                )
            )
    for label in [ORCHESTRATOR, TEMPLATE, *modules]:
        built_in = label not in (ORCHESTRATOR, TEMPLATE)
        for metric in ("pss", "uss"):
            results.append(
                _row(
                    f"{label} {metric.upper()}, idle",
                    TARGET_SERVER_USS_MB if built_in and metric == "uss" else None,
                    [getattr(f, metric) for f in forked.idle.per_process.get(label, [])],
                    [getattr(f, metric) for f in spawned.idle.per_process.get(label, [])],
                )
            )
    memory_loaded = (
        "memory",
        forked.loaded.per_process.get("memory", []),
        spawned.loaded.per_process.get("memory", []),
    )
    for metric in ("pss", "uss"):
        results.append(
            _row(
                f"memory {metric.upper()}, model loaded",
                None,
                [getattr(f, metric) for f in memory_loaded[1]],
                [getattr(f, metric) for f in memory_loaded[2]],
            )
        )
    errors = forked.errors + spawned.errors
    if errors:
        results[0].errors.extend(errors)
    if not sys.platform.startswith("linux"):
        results[0].errors.append("needs Linux: the figures come from /proc/PID/smaps_rollup")
    return results
