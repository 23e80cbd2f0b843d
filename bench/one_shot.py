"""What a person feels from one command: wall time and CPU of ``echo hi | nexo chat`` and ``nexo status``
against a running default mesh, of ``nexo agent run "hi"`` and ``nexo pair seed`` with and without a
running daemon, of ``nexo memory search`` with one, of ``nexo run --check-config`` with none (it
reaches every server of the default mesh), and restart to first reply.

Each command is a real process; its CPU is its own user + system time as the kernel counts it
(``wait4``), children that it waited for included. Baselines are measured in the same run: the
interpreter doing nothing (``python -c pass``) for the one-shot commands, and
``python -c "import mcp"`` (what every server pays before it can answer) for a restart.

A command without a daemon runs 3 times, a restart 9 times (once each with ``--quick``): a restart's
wall time on 2 cores moves by a quarter from one to the next, and the median of three of them moved
across its 1.5 s target between runs of the same code (1.46, 1.77 and 1.50 s within two hours).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from bench.mesh_run import MeshNotReady, default_mesh, mesh_config, scripted_model, workdir
from bench.stats import Result
from bench.support import describe, progress
from tests.mesh.harness import REPO, base_env, nexo_argv, stop

RESTARTS = 9
CHAT_VS_PYTHON = (1.5, 100.0)
"""Target: ``echo hi | nexo chat`` at most 1.5x ``python -c pass`` + 100 ms."""
AGENT_RUN_WITH_DAEMON_S = 0.5
AGENT_RUN_ALONE_S = 2.0
AGENT_RUN_ALONE_CPU_S = 2.5
RESTART_TO_REPLY_S = 1.5
COMMAND_TIMEOUT_S = 120.0
REPLY = "ok"
"""What the scripted model answers every request with."""


@dataclass(frozen=True, slots=True)
class Ran:
    wall_s: float
    cpu_s: float
    code: int
    stdout: str
    stderr: str

    def problem(self, what: str, expected_stdout: str | None = None) -> str | None:
        if self.code != 0:
            return f"{what} exited {self.code}: {_last_lines(self.stderr)}"
        if expected_stdout is not None and self.stdout != expected_stdout:
            return f"{what} printed {self.stdout[:200]!r}, expected {expected_stdout!r}"
        return None


def _last_lines(text: str, n: int = 3) -> str:
    return " / ".join(text.strip().splitlines()[-n:]) or "(no output)"


def run_child(argv: list[str], env: Mapping[str, str], *, stdin_text: str = "") -> Ran:
    """Run ``argv`` to its end: wall time from spawn to exit, and the kernel's count of its CPU."""
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        stdin.write(stdin_text.encode())
        stdin.seek(0)
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=err, env=dict(env), cwd=REPO)
        watchdog = threading.Timer(COMMAND_TIMEOUT_S, process.kill)
        watchdog.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            watchdog.cancel()
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Ran(
            wall_s=wall,
            cpu_s=usage.ru_utime + usage.ru_stime,
            code=process.returncode,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
        )


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _chat(config: Path) -> list[str]:
    return nexo_argv("chat", "--config", str(config), "--timeout", "60")


def _agent_run(config: Path) -> list[str]:
    return nexo_argv("agent", "run", "hi", "--config", str(config))


def _status(config: Path) -> list[str]:
    return nexo_argv("status", "--config", str(config))


def _pair_seed(config: Path) -> list[str]:
    return nexo_argv("pair", "seed", "console", "default", "bench-contact", "--config", str(config))


def _memory_search(config: Path) -> list[str]:
    return nexo_argv("memory", "search", "what time is it", "--config", str(config))


def _check_config(config: Path) -> list[str]:
    return nexo_argv("run", "--check-config", "--config", str(config))


@dataclass
class Rows:
    chat_wall: Result
    chat_cpu: Result
    status_wall: Result
    status_cpu: Result
    agent_daemon_wall: Result
    agent_daemon_cpu: Result
    agent_alone_wall: Result
    agent_alone_cpu: Result
    seed_daemon_wall: Result
    seed_daemon_cpu: Result
    seed_alone_wall: Result
    seed_alone_cpu: Result
    memory_daemon_wall: Result
    memory_daemon_cpu: Result
    check_alone_wall: Result
    check_alone_cpu: Result
    restart: Result

    @classmethod
    def empty(cls) -> Rows:
        python = "python -c pass"
        return cls(
            chat_wall=Result(
                "echo hi | nexo chat, running mesh (wall)", "ms", python, relative_target=CHAT_VS_PYTHON
            ),
            chat_cpu=Result("echo hi | nexo chat, running mesh (CPU)", "ms", python),
            status_wall=Result("nexo status, running mesh (wall)", "ms", python),
            status_cpu=Result("nexo status, running mesh (CPU)", "ms", python),
            agent_daemon_wall=Result(
                'nexo agent run "hi", daemon running (wall)', "s", python, target=AGENT_RUN_WITH_DAEMON_S
            ),
            agent_daemon_cpu=Result('nexo agent run "hi", daemon running (CPU)', "s", python),
            agent_alone_wall=Result(
                'nexo agent run "hi", no daemon (wall)', "s", python, target=AGENT_RUN_ALONE_S
            ),
            agent_alone_cpu=Result(
                'nexo agent run "hi", no daemon (CPU)', "s", python, target=AGENT_RUN_ALONE_CPU_S
            ),
            seed_daemon_wall=Result("nexo pair seed, daemon running (wall)", "s", python),
            seed_daemon_cpu=Result("nexo pair seed, daemon running (CPU)", "s", python),
            seed_alone_wall=Result("nexo pair seed, no daemon (wall)", "s", python),
            seed_alone_cpu=Result("nexo pair seed, no daemon (CPU)", "s", python),
            memory_daemon_wall=Result("nexo memory search, daemon running (wall)", "s", python),
            memory_daemon_cpu=Result("nexo memory search, daemon running (CPU)", "s", python),
            check_alone_wall=Result("nexo run --check-config, no daemon (wall)", "s", python),
            check_alone_cpu=Result("nexo run --check-config, no daemon (CPU)", "s", python),
            restart=Result(
                "restart to first reply",
                "s",
                'spawn-to-exit of python -c "import mcp"',
                target=RESTART_TO_REPLY_S,
            ),
        )

    def all(self) -> list[Result]:
        return [
            self.chat_wall,
            self.chat_cpu,
            self.status_wall,
            self.status_cpu,
            self.agent_daemon_wall,
            self.agent_daemon_cpu,
            self.agent_alone_wall,
            self.agent_alone_cpu,
            self.seed_daemon_wall,
            self.seed_daemon_cpu,
            self.seed_alone_wall,
            self.seed_alone_cpu,
            self.memory_daemon_wall,
            self.memory_daemon_cpu,
            self.check_alone_wall,
            self.check_alone_cpu,
            self.restart,
        ]


def _record(wall: Result, cpu: Result, ran: Ran, problem: str | None, scale: float) -> bool:
    """Add one run's figures (``scale`` converts seconds to the rows' unit); False after a failure."""
    if problem is not None:
        wall.errors.append(problem)
        cpu.errors.append(problem)
        return False
    wall.samples.append(ran.wall_s * scale)
    cpu.samples.append(ran.cpu_s * scale)
    return True


def _baselines(rows: Rows, n: int, env: Mapping[str, str]) -> None:
    progress(f"one-shot: {n} x python -c pass and python -c 'import mcp' (baselines)")
    for _ in range(n):
        idle = run_child(_python("pass"), env)
        for wall, cpu in ((rows.chat_wall, rows.chat_cpu), (rows.status_wall, rows.status_cpu)):
            wall.baseline.append(idle.wall_s * 1000)
            cpu.baseline.append(idle.cpu_s * 1000)
        for wall, cpu in (
            (rows.agent_daemon_wall, rows.agent_daemon_cpu),
            (rows.agent_alone_wall, rows.agent_alone_cpu),
            (rows.seed_daemon_wall, rows.seed_daemon_cpu),
            (rows.seed_alone_wall, rows.seed_alone_cpu),
            (rows.memory_daemon_wall, rows.memory_daemon_cpu),
            (rows.check_alone_wall, rows.check_alone_cpu),
        ):
            wall.baseline.append(idle.wall_s)
            cpu.baseline.append(idle.cpu_s)
        rows.restart.baseline.append(run_child(_python("import mcp"), env).wall_s)


def _against_running_mesh(rows: Rows, config: Path, n: int, env: Mapping[str, str]) -> None:
    # The first message warms the mesh (the memory server's model, the sessions), as a person's would.
    warm = run_child(_chat(config), env, stdin_text="hi\n")
    problem = warm.problem("echo hi | nexo chat", f"{REPLY}\n")
    if problem is not None:
        rows.chat_wall.errors.append(problem)
        rows.chat_cpu.errors.append(problem)
        return
    times = partial(_times, env=env)
    times(n, rows.chat_wall, rows.chat_cpu, _chat(config), "nexo chat", 1000, stdin_text="hi\n")
    times(n, rows.status_wall, rows.status_cpu, _status(config), "nexo status", 1000)
    times(n, rows.agent_daemon_wall, rows.agent_daemon_cpu, _agent_run(config), "nexo agent run", 1)
    times(n, rows.seed_daemon_wall, rows.seed_daemon_cpu, _pair_seed(config), "nexo pair seed", 1)
    times(n, rows.memory_daemon_wall, rows.memory_daemon_cpu, _memory_search(config), "nexo memory search", 1)


def _times(
    n: int,
    wall: Result,
    cpu: Result,
    argv: list[str],
    label: str,
    scale: float,
    *,
    env: Mapping[str, str],
    stdin_text: str = "",
) -> None:
    """``n`` runs of ``argv`` into the two rows (``scale`` converts seconds to their unit), stopping
    at the first that fails; ``nexo chat`` must print the scripted reply."""
    progress(f"one-shot: {n} x {wall.name.removesuffix(' (wall)')}")
    expected = f"{REPLY}\n" if stdin_text else None
    for _ in range(n):
        ran = run_child(argv, env, stdin_text=stdin_text)
        if not _record(wall, cpu, ran, ran.problem(label, expected), scale):
            break


def _restart_to_first_reply(config: Path, env: Mapping[str, str]) -> float:
    """Spawn ``nexo run`` and at once ``echo hi | nexo chat`` (which waits for the console): seconds
    from the spawn to the reply."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        daemon = subprocess.Popen(
            nexo_argv("run", "--config", str(config)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=dict(env),
            cwd=REPO,
        )
        try:
            ran = run_child(_chat(config), env, stdin_text="hi\n")
            elapsed = time.perf_counter() - start
        finally:
            stop(daemon)
        problem = ran.problem("echo hi | nexo chat after a restart", f"{REPLY}\n")
        if problem is not None:
            log.seek(0)
            raise MeshNotReady(f"{problem}; nexo run: {_last_lines(log.read().decode(errors='replace'))}")
    return elapsed


def measure(quick: bool) -> list[Result]:
    n = 3 if quick else 10
    runs = 1 if quick else 3
    restarts = 1 if quick else RESTARTS
    rows = Rows.empty()
    env = base_env({"NEXO_LOG_LEVEL": "WARNING"})
    _baselines(rows, n, env)
    with scripted_model() as fake, workdir() as tmp:
        try:
            with default_mesh(fake, tmp, "one-shot") as started:
                _against_running_mesh(rows, started.config, n, env)
        except MeshNotReady as exc:
            for row in (
                rows.chat_wall,
                rows.chat_cpu,
                rows.status_wall,
                rows.status_cpu,
                rows.agent_daemon_wall,
                rows.agent_daemon_cpu,
                rows.seed_daemon_wall,
                rows.seed_daemon_cpu,
            ):
                row.errors.append(str(exc))
        config = mesh_config(fake, tmp, "one-shot")
        times = partial(_times, env=env)
        times(runs, rows.agent_alone_wall, rows.agent_alone_cpu, _agent_run(config), "nexo agent run", 1)
        times(runs, rows.seed_alone_wall, rows.seed_alone_cpu, _pair_seed(config), "nexo pair seed", 1)
        check = _check_config(config)
        times(runs, rows.check_alone_wall, rows.check_alone_cpu, check, "nexo run --check-config", 1)
        progress(f"one-shot: {restarts} x restart to first reply")
        for _ in range(restarts):
            try:
                rows.restart.samples.append(_restart_to_first_reply(config, env))
            except (MeshNotReady, OSError) as exc:
                rows.restart.errors.append(describe(exc))
                break
    return rows.all()
