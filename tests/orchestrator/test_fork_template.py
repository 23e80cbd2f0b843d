"""The fork server's template forked from the orchestrator's own process: what it keeps, what it drops.

One probe process plays the orchestrator before its event loop: it takes the state directory's
instance lock, opens a listening socket (as the control socket would be), forks the template, then
closes its own descriptor of the lock without unlocking it, as a killed orchestrator's is closed.
The tests look at the template from the outside (``/proc``), take the lock themselves, then let the
probe fork one server from the template and stop it all under its event loop.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.cli.agent import foreground_mesh
from orchestrator.lock import AlreadyRunning, InstanceLock
from orchestrator.mesh import Mesh, StdioServerConfig
from orchestrator.mesh.template import fork_template, unsafe_to_fork
from shared.forkchild import fitted
from tests.mesh.harness import FORK_SERVER, REPO, child_pids, python_server, write_config

PROBE = r"""
import atexit, json, os, socket, sys
from pathlib import Path

import anyio

from orchestrator.lock import AlreadyRunning, InstanceLock
from orchestrator.mesh.fork_request import ForkRequest
from orchestrator.mesh.forkserver import ForkServer

state, work = Path(sys.argv[1]), sys.argv[2]
lock = InstanceLock(state, config="probe").__enter__()
listener = socket.create_server(("127.0.0.1", 0))
atexit.register(Path(work, "orchestrator-exit-handler-ran").touch)
server = ForkServer({})
forked = server.fork_template()
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if target == str(lock.path):
        os.close(int(fd))  # gone without unlocking, as when the orchestrator is killed
print(json.dumps({"forked": forked, "template": server.pid, "sid": os.getsid(0)}), flush=True)
sys.stdin.readline()


async def one_child() -> dict[str, object]:
    read, write = os.pipe()
    async with server:
        child = await server.fork(ForkRequest("fork_probe", [], {"PATH": "/usr/bin"}, work), (0, write, 2))
        os.close(write)
        assert child is not None
        with anyio.fail_after(30):
            await child.reported.wait()
        child.close()
    with os.fdopen(read) as out:
        seen = json.loads(out.read())
    try:
        os.waitpid(-1, os.WNOHANG)
        left = True
    except ChildProcessError:
        left = False
    ran = Path(work, "orchestrator-exit-handler-ran").exists()
    return {
        "child_parent": seen["ppid"],
        "child_code": child.returncode,
        "children_left": left,
        "orchestrator_exit_handler_ran": ran,
    }


print(json.dumps(anyio.run(one_child)), flush=True)
os._exit(0)
"""

CHILD = """import json, os
print(json.dumps({"ppid": os.getppid()}))
"""


@dataclass
class Template:
    pid: int
    forked: bool
    probe_sid: int
    lock_free: bool
    fds: dict[int, str]
    cmdline: list[str]
    comm: str
    sid: int
    after: dict[str, Any]


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except FileNotFoundError:
        return None


def _fds(pid: int) -> dict[int, str]:
    found = {}
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found[int(entry.name)] = str(entry.readlink())
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    work = tmp_path_factory.mktemp("fork-template")
    (work / "fork_probe.py").write_text(CHILD)
    state = work / "state"
    with subprocess.Popen(
        [sys.executable, "-c", PROBE, str(state), str(work)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    ) as probe:
        assert probe.stdin is not None
        assert probe.stdout is not None
        try:
            first = json.loads(probe.stdout.readline())
            pid = first["template"]
            fds = _fds(pid)
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            sid = os.getsid(pid)
            try:
                with InstanceLock(state, config="test"):
                    lock_free = True
            except AlreadyRunning:
                lock_free = False
            probe.stdin.write("go\n")
            probe.stdin.flush()
            after = json.loads(probe.stdout.readline())
            assert probe.wait(timeout=30) == 0
        finally:
            if probe.poll() is None:
                probe.kill()
    return Template(
        pid=pid,
        forked=first["forked"],
        probe_sid=first["sid"],
        lock_free=lock_free,
        fds=fds,
        cmdline=[part.decode() for part in cmdline],
        comm=comm,
        sid=sid,
        after=after,
    )


@pytest.mark.scenario
def test_the_template_is_forked_and_keeps_no_descriptor_of_the_orchestrator_but_stderr(
    template: Template,
) -> None:
    sockets = {fd: target for fd, target in template.fds.items() if target.startswith("socket:")}
    assert template.forked is True
    assert (template.fds[0], template.fds[1]) == (os.devnull, os.devnull)
    assert 2 in template.fds
    assert [t for t in template.fds.values() if t.endswith("orchestrator.lock")] == []
    assert len(sockets) == 1, f"only the control socket, not the listener too: {sockets}"


@pytest.mark.scenario
def test_a_forked_template_does_not_hold_the_instance_lock_of_an_orchestrator_that_is_gone(
    template: Template,
) -> None:
    assert template.lock_free is True


@pytest.mark.scenario
def test_the_forked_template_has_its_own_session_and_the_title_tools_look_for(template: Template) -> None:
    assert template.sid == template.pid != template.probe_sid
    assert " ".join(template.cmdline).startswith(f"{sys.executable} {FORK_SERVER}")
    assert template.comm == Path(sys.executable).name[:15]


@pytest.mark.scenario
def test_a_server_forked_from_a_forked_template_exits_without_the_orchestrators_exit_handlers_and_is_reaped(
    template: Template,
) -> None:
    assert template.after == {
        "child_parent": template.pid,
        "child_code": 0,
        "children_left": False,
        "orchestrator_exit_handler_ran": False,
    }


def test_the_template_is_not_forked_while_another_thread_runs() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        why = fork_template()
    finally:
        stop.set()
        other.join()
    assert isinstance(why, str)
    assert why.startswith("this process runs ")
    assert why.endswith("threads, which a forked template would lack")


@pytest.mark.anyio
async def test_the_template_is_not_forked_under_a_running_event_loop(tmp_path: Path) -> None:
    servers = {
        name: StdioServerConfig(transport="stdio", command=sys.executable, args=["-m", f"servers.{name}"])
        for name in ("time", "audit")
    }
    mesh = Mesh(servers, base_env={"NEXO_STATE_DIR": str(tmp_path)}, fork_server=True)
    assert mesh.fork_server is not None
    assert mesh.fork_server.fork_template() is False
    assert unsafe_to_fork() == "an event loop is running in this process"
    assert mesh.fork_server.pid is None


def test_a_command_line_that_does_not_fit_names_the_program_without_its_directory() -> None:
    argv = ["/usr/local/bin/python3", "-m", "channel_servers.console"]
    assert fitted(argv, 100) == b"/usr/local/bin/python3\0-m\0channel_servers.console"
    assert fitted(argv, 40) == b"python3\0-m\0channel_servers.console"
    assert fitted(argv, 10) == b"python3\0-m"


@pytest.mark.scenario
def test_agent_run_without_a_daemon_forks_its_tool_servers_from_one_template(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url="http://127.0.0.1:9/v1",
        servers={
            "console": python_server("channel_servers.console"),
            "time": python_server("servers.time"),
            "audit": python_server("servers.audit"),
        },
    )
    args = argparse.Namespace(config=str(config), agent=None)
    _config, _agent, mesh = foreground_mesh(args)

    async def parents() -> tuple[set[int | None], int | None]:
        async with mesh:
            assert await mesh.wait_ready(60) == []
            assert mesh.fork_server is not None
            children = child_pids(os.getpid(), "servers.time") + child_pids(os.getpid(), "servers.audit")
            return {_parent(pid) for pid in children}, mesh.fork_server.pid

    found, template = anyio.run(parents)
    assert sorted(mesh.connections) == ["audit", "time"]
    assert template is not None
    assert found == {template}
