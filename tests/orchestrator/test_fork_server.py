"""Built-in stdio servers are forked from one preloaded template and behave like spawned ones."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.config.nexo import NexoConfig
from orchestrator.daemon.orchestrator import Orchestrator
from orchestrator.mesh import Mesh, StdioServerConfig
from orchestrator.mesh.fork_request import ForkRequest, built_in_module
from orchestrator.mesh.forked_process import ForkedProcess
from orchestrator.mesh.forkserver import ForkServer
from orchestrator.mesh.transport import template_environment
from shared.forkchild import exit_code
from tests.mesh.harness import child_pids

pytestmark = pytest.mark.anyio

PROBE = """
import json, os, sys
print(json.dumps({
    "argv": sys.argv[1:],
    "cwd": os.getcwd(),
    "path0": sys.path[0],
    "env": dict(os.environ),
    "pid": os.getpid(),
    "ppid": os.getppid(),
    "sid": os.getsid(0),
    "pgid": os.getpgid(0),
    "cmdline": open("/proc/self/cmdline", "rb").read().rstrip(b"\\0").split(b"\\0"),
}, default=bytes.decode), flush=True)
if sys.argv[1] == "wait":
    sys.stdin.read()
sys.exit(int(sys.argv[2]))
"""
"""A module run as ``python -m fork_probe MODE CODE``: reports what it sees, then exits with CODE."""


def _parent(pid: int) -> int | None:
    """The parent of a live process; None once it is gone (a zombie counts as gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    state, ppid = text.rsplit(")", 1)[1].split()[:2]
    return int(ppid) if state != "Z" else None


@asynccontextmanager
async def _probe(
    server: ForkServer, cwd: Path, *args: str, env: dict[str, str]
) -> AsyncIterator[tuple[ForkedProcess, dict[str, Any], int]]:
    """Fork the probe; yield it, what it printed, and our end of its stdin."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    try:
        process = await server.fork(
            ForkRequest("fork_probe", list(args), env, str(cwd)), (stdin_read, stdout_write, 2)
        )
    finally:
        os.close(stdin_read)
        os.close(stdout_write)
    assert process is not None
    try:
        with os.fdopen(stdout_read, "rb") as out:
            line = await anyio.to_thread.run_sync(out.readline)
        yield process, json.loads(line), stdin_write
    finally:
        os.close(stdin_write)
        process.close()


@pytest.mark.scenario
async def test_a_forked_child_runs_its_module_as_python_dash_m_would_and_reports_its_exit(
    tmp_path: Path,
) -> None:
    (tmp_path / "fork_probe.py").write_text(PROBE)
    env = {"PATH": os.environ["PATH"], "PROBE": "yes"}
    async with ForkServer(template_environment({"TEMPLATE_ONLY": "1"})) as server:
        async with _probe(server, tmp_path, "exit", "3", env=env) as (process, seen, _stdin):
            with anyio.fail_after(10):
                await process.reported.wait()
        async with _probe(server, tmp_path, "wait", "0", env=env) as (blocked, _, _stdin):
            blocked.kill_group(signal.SIGKILL)
            with anyio.fail_after(10):
                await blocked.reported.wait()
        template = server.pid
    assert seen["argv"] == ["exit", "3"]
    assert (seen["cwd"], seen["path0"]) == (str(tmp_path), str(tmp_path))
    assert seen["env"] == env
    assert (seen["pid"], seen["ppid"]) == (process.pid, template)
    assert seen["sid"] == seen["pgid"] == process.pid
    assert seen["cmdline"] == [sys.executable, "-m", "fork_probe", "exit", "3"]
    assert (process.returncode, blocked.returncode) == (3, -signal.SIGKILL)
    assert template is not None
    assert _parent(template) is None


@pytest.mark.scenario
async def test_a_request_whose_stdin_has_no_writer_left_is_refused_not_forked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The requester closed the child's stdin before the template got to it (a stop while
    starting): nothing is forked that would start only to find its input gone."""
    (tmp_path / "fork_probe.py").write_text(PROBE)
    env = {"PATH": os.environ["PATH"]}
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    os.close(stdin_write)
    try:
        async with ForkServer(template_environment({})) as server:
            refused = await server.fork(
                ForkRequest("fork_probe", ["exit", "0"], env, str(tmp_path)), (stdin_read, stdout_write, 2)
            )
            os.close(stdout_write)
            assert refused is None
            assert server.pid is not None  # the template runs: it refused, it did not fail
            assert child_pids(server.pid, "fork_probe") == []
            with os.fdopen(stdout_read, "rb") as out:
                assert out.read() == b""  # no child holds the other end
    finally:
        os.close(stdin_read)
    assert "could not fork fork_probe: not started: its stdin was closed first" in caplog.text


@pytest.mark.scenario
async def test_built_in_servers_are_forked_and_after_the_template_dies_spawned_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def built_in(module: str) -> StdioServerConfig:
        return StdioServerConfig(transport="stdio", command=sys.executable, args=["-m", module])

    caplog.set_level(logging.WARNING, logger="nexo.mesh")
    servers = {"time": built_in("servers.time"), "audit": built_in("servers.audit")}
    async with Mesh(servers, base_env={"NEXO_STATE_DIR": str(tmp_path)}, fork_server=True) as mesh:
        assert mesh.fork_server is not None
        assert await mesh.wait_ready(60) == []
        template = mesh.fork_server.pid
        [forked_time] = child_pids(os.getpid(), "servers.time")
        [forked_audit] = child_pids(os.getpid(), "servers.audit")
        parents = {_parent(forked_time), _parent(forked_audit)}
        first = await mesh["time"].call_tool("now", {"timezone_name": "UTC"})
        assert template is not None
        os.kill(template, signal.SIGKILL)
        os.kill(forked_time, signal.SIGKILL)
        with anyio.fail_after(30):
            await mesh["time"].wait_closed()
            await mesh["time"].wait_ready(30)
        [spawned_time] = child_pids(os.getpid(), "servers.time")
        respawned_parent = _parent(spawned_time)
        again = await mesh["time"].call_tool("now", {"timezone_name": "UTC"})
        audit_kept = mesh["audit"].client is not None and _parent(forked_audit) is not None
    assert parents == {template}
    assert respawned_parent == os.getpid()
    assert (first.is_error, again.is_error, audit_kept) == (False, False, True)
    assert [r.getMessage() for r in caplog.records if "fork server" in r.getMessage()] == [
        "fork server: it exited; built-in servers are started as their own commands from now on"
    ]
    assert [_parent(pid) for pid in (template, forked_time, forked_audit, spawned_time)] == [None] * 4


@pytest.mark.scenario
async def test_a_template_that_cannot_start_means_spawning_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="nexo.mesh")
    broken = {"PYTHONHOME": str(tmp_path / "no-python-here")}
    request = ForkRequest("servers.time", [], broken, str(tmp_path))
    async with ForkServer(broken) as server:
        with anyio.fail_after(30):
            first = await server.fork(request, (0, 1, 2))
            second = await server.fork(request, (0, 1, 2))
    assert (first, second) == (None, None)
    # Only nexo's own: asyncio may add a notice of its own about reaping the template that exited.
    assert [r.getMessage() for r in caplog.records if r.name == "nexo.mesh"] == [
        "fork server: it did not start: it exited; built-in servers are started as their own commands "
        "from now on"
    ]


async def test_a_server_with_interpreter_variables_of_its_own_is_spawned_not_forked(tmp_path: Path) -> None:
    request = ForkRequest("servers.time", [], {"PYTHONOPTIMIZE": "1"}, str(tmp_path))
    async with ForkServer(template_environment({})) as server:
        forked = await server.fork(request, (0, 1, 2))
        started = server.pid
    assert (forked, started) == (None, None)


def test_the_fork_server_is_on_by_default_for_two_built_in_servers_and_the_config_turns_it_off(
    tmp_path: Path,
) -> None:
    def forks(*modules: str, **extra: Any) -> bool:
        config = NexoConfig.model_validate(
            {
                "state_dir": str(tmp_path),
                "servers": {
                    module: {"transport": "stdio", "command": sys.executable, "args": ["-m", module]}
                    for module in modules
                },
                "agents": [{"id": "nexo", "model": {"provider": "local"}}],
                **extra,
            }
        )
        return Orchestrator(config, config_label="test").mesh.fork_server is not None

    two = ("servers.time", "servers.audit")
    assert [forks(*two), forks(*two, fork_server=False), forks("servers.time")] == [True, False, False]


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        (sys.executable, ["-m", "servers.memory"], "servers.memory"),
        (sys.executable, ["-m", "channel_servers.console", "--flag"], "channel_servers.console"),
        (sys.executable, ["-m", "third_party.server"], None),
        (sys.executable, ["-u", "-m", "servers.time"], None),
        ("/usr/bin/python3", ["-m", "servers.time"], None),
        ("npx", ["some-mcp-server"], None),
    ],
)
def test_only_this_interpreter_running_a_built_in_module_is_forked(
    command: str, args: list[str], expected: str | None
) -> None:
    config = StdioServerConfig(transport="stdio", command=command, args=args)
    assert built_in_module(config) == expected


@pytest.mark.parametrize(("value", "code"), [(None, 0), (0, 0), (4, 4), (256 + 7, 7), ("bad input", 1)])
def test_a_forked_child_exits_with_the_code_the_interpreter_would_use(value: object, code: int) -> None:
    assert exit_code(value) == code
