"""Start the default mesh (every server of ``orchestrator/defaults.yaml``) as a real ``nexo run``."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.fakes.llm import FakeLLM, Reply
from tests.mesh.harness import Orchestrator, python_server, running, write_config

DEFAULTS = Path(__file__).resolve().parents[1] / "orchestrator" / "defaults.yaml"
"""The built-in configuration ``nexo run`` uses when no --config is given."""


def default_servers() -> dict[str, str]:
    """Server name -> module of the built-in defaults, read from the file ``nexo run`` uses."""
    servers = yaml.safe_load(DEFAULTS.read_text())["servers"]
    return {name: entry["args"][-1] for name, entry in servers.items()}


READY_TIMEOUT_S = 20.0
"""How long to wait for the ready line before calling the start failed (4x the cold-start target)."""
NOT_READY_MARK = "is not ready yet"


class MeshNotReady(Exception):
    """``nexo run`` did not print its ready line, or printed it with servers still missing."""


@dataclass(frozen=True, slots=True)
class Started:
    orchestrator: Orchestrator
    elapsed_s: float
    """From spawning ``nexo run`` to its ready line."""
    config: Path
    """The config ``nexo run`` was given (one-shot commands against this mesh use it too)."""
    state_dir: Path


def _interesting(log: str, limit: int = 4) -> str:
    """The last warnings and errors of an orchestrator log, for a one-line report."""
    every = [line.strip() for line in log.splitlines() if line.strip()]
    lines = [line for line in every if " WARNING " in line or " ERROR " in line or "Error" in line]
    return " / ".join(line[:240] for line in (lines or every)[-limit:]) or "(empty log)"


@contextmanager
def scripted_model() -> Iterator[FakeLLM]:
    """A model endpoint for the config; ``nexo run`` only needs it to exist."""
    with FakeLLM(default=Reply("ok")) as fake:
        yield fake


@contextmanager
def default_mesh(
    fake: FakeLLM, workdir: Path, label: str, also: Mapping[str, str] | None = None
) -> Iterator[Started]:
    """``nexo run`` on a fresh state dir, timed to its ready line; stopped on exit."""
    config = mesh_config(fake, workdir, label, also)
    start = time.perf_counter()
    try:
        with running(config, timeout=READY_TIMEOUT_S) as orch:
            elapsed = time.perf_counter() - start
            missing = [line for line in orch.lines if NOT_READY_MARK in line]
            if missing:
                raise MeshNotReady(
                    f"ready after {elapsed:.1f}s with servers missing: {_interesting(orch.log())}"
                )
            yield Started(orch, elapsed, config, workdir / f"state-{label}")
    except AssertionError as exc:
        log = str(exc).partition("\n")[2]  # the first line only says that it was not ready
        raise MeshNotReady(f"no ready line within {READY_TIMEOUT_S:g}s; log: {_interesting(log)}") from exc


def mesh_config(fake: FakeLLM, workdir: Path, label: str, also: Mapping[str, str] | None = None) -> Path:
    """The default mesh's config on a fresh state dir, with the scripted model; ``also`` adds servers
    (name -> module)."""
    servers = {**default_servers(), **(also or {})}
    return write_config(
        workdir / f"{label}.yaml",
        state_dir=workdir / f"state-{label}",
        llm_base_url=fake.openai_base_url,
        servers={name: python_server(module) for name, module in servers.items()},
    )


@contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="nexo-bench-") as tmp:
        yield Path(tmp)
