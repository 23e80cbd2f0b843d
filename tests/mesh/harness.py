"""Start real nexo processes for whole-mesh scenarios, with bounded waits and no sleeps."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

READY_MARK = "nexo ready"
REPO = Path(__file__).resolve().parents[2]
FORK_SERVER = "-m shared.forkserver"
"""In the command line of the template that built-in servers are forked from."""


def nexo_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "orchestrator.cli.main", *args]


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEXO_")}
    env["NEXO_LOG_LEVEL"] = "INFO"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


TEST_OWNERS = ("operator", "local")
"""Sender ids of the console and of the fake Claude Code channel: admitted as the owner."""


def python_server(module: str, **extra: Any) -> dict[str, Any]:
    return {"transport": "stdio", "command": sys.executable, "args": ["-m", module], **extra}


def write_config(
    path: Path,
    *,
    state_dir: Path,
    llm_base_url: str,
    servers: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    config: dict[str, Any] = {
        "state_dir": str(state_dir),
        "servers": servers
        if servers is not None
        else {"console": python_server("channel_servers.console"), "time": python_server("servers.time")},
        "llm": {
            "providers": {
                "fake": {
                    "kind": "openai_compat",
                    "base_url": llm_base_url,
                    "model": "scripted",
                    "max_retries": 0,
                }
            }
        },
        "agents": [{"id": "nexo", "model": {"provider": "fake"}, "channels": ["console"], **(agent or {})}],
        "channels": {
            "enabled": True,
            "approved": [{"server": name} for name in (agent or {}).get("channels", ["console"])],
        },
        "supervision": {"initial_backoff_s": 0.05, "max_backoff_s": 0.5},
        **(extra or {}),
    }
    # The test channels' own users are the operator, as `pairing.allow_from` says for a real setup.
    options = config.setdefault("channel_options", {})
    for name in (agent or {}).get("channels", ["console"]):
        options.setdefault(name, {}).setdefault("pairing", {"allow_from": list(TEST_OWNERS)})
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Orchestrator:
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                if READY_MARK in line:
                    self.ready.set()
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for_line(self, text: str, timeout: float = 30.0, *, start: int = 0) -> int:
        """Index of the first stderr line from ``start`` on that contains ``text``."""
        with self._changed:
            ok = self._changed.wait_for(
                lambda: any(text in line for line in self.lines[start:]) or self.process.poll() is not None,
                timeout=timeout,
            )
            for i, line in enumerate(self.lines[start:], start):
                if text in line:
                    return i
        raise AssertionError(
            f"no log line containing {text!r} (ok={ok}); log:\n" + "\n".join(self.lines[-40:])
        )

    def log(self) -> str:
        return "\n".join(self.lines)


def stop(process: subprocess.Popen[bytes] | subprocess.Popen[str], timeout: float = 20.0) -> None:
    """Terminate, then kill if it does not exit within ``timeout``."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextmanager
def running(
    config: Path,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    cwd: Path = REPO,
    wait_ready: bool = True,
) -> Iterator[Orchestrator]:
    """``nexo run`` from ``cwd`` (where relative paths in the config resolve) until the block ends;
    the block starts once it is ready, or at once without ``wait_ready``."""
    process = subprocess.Popen(
        nexo_argv("run", "--config", str(config)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=base_env(env),
        cwd=cwd,
    )
    orch = Orchestrator(process)
    reader = threading.Thread(target=orch._read, daemon=True)
    reader.start()
    try:
        if wait_ready and not orch.ready.wait(timeout):
            raise AssertionError("orchestrator did not become ready; log:\n" + orch.log())
        yield orch
    finally:
        stop(process)
        reader.join(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


@contextmanager
def http_console(port: int, state: Path, token: str) -> Iterator[list[int]]:
    """``nexo serve console --http`` on ``port`` with a bearer token, its state in ``state``; yields its
    pid. An orchestrator configured with ``http_server_entry(port, token)`` waits for it to listen."""
    process = subprocess.Popen(
        nexo_argv("serve", "console", "--http", f"127.0.0.1:{port}"),
        env=base_env({"NEXO_SERVER_TOKEN": token, "NEXO_STATE_DIR": str(state)}),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield [process.pid]
    finally:
        stop(process)


def http_server_entry(port: int, token: str) -> dict[str, Any]:
    """The config entry of a server reached over Streamable HTTP on loopback ``port``."""
    return {"transport": "http", "url": f"http://127.0.0.1:{port}/mcp", "token": token}


def chat(
    config: Path, *lines: str, timeout: float = 60.0, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        nexo_argv("chat", "--config", str(config), "--timeout", str(timeout)),
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        env=base_env(env),
        cwd=REPO,
        timeout=timeout + 30,
        check=False,
    )


def nexo(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        nexo_argv(*args),
        capture_output=True,
        text=True,
        env=base_env(env),
        cwd=REPO,
        timeout=timeout,
        check=False,
    )


def process_table() -> dict[int, tuple[int, str]]:
    """Every process's parent and command line, by pid (Linux /proc)."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        table[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmdline)
    return table


def child_pids(parent: int, needle: str) -> list[int]:
    """Processes ``parent`` started whose command line contains ``needle`` (Linux /proc).

    Its children, and the children of its fork server (``shared.forkserver``), which forks the
    built-in servers on its behalf.
    """
    table = process_table()
    templates = {pid for pid, (ppid, cmdline) in table.items() if ppid == parent and FORK_SERVER in cmdline}
    return sorted(
        pid
        for pid, (ppid, cmdline) in table.items()
        if (ppid == parent or ppid in templates) and needle in cmdline
    )


def status(config: Path) -> dict[str, Any]:
    result = nexo("status", "--config", str(config), "--json")
    data: dict[str, Any] = json.loads(result.stdout)
    return data
