"""Built-in servers asked of the template before the event loop, then adopted by their connections.

One probe process plays ``nexo run``: it forks the template, whose preloading is held at a gate
(a module that reads a FIFO) so that it cannot answer yet, takes the instance lock and asks it for the
time and audit servers before its event loop exists. Asking must not wait for the template: no
server exists until the probe opens the gate. Then it runs a mesh of the time server alone over
that fork server. The time server's connection must adopt the process started for it (not fork a
second one); the audit server, which no connection adopts, must end with the mesh. Preloading
freezes what is imported without a full collection.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from orchestrator.preloads import DAEMON_LEAVES, SERVERS_ONLY
from shared.forkserver import PRELOAD
from tests.fakes.llm import FakeLLM, Reply
from tests.mesh.harness import REPO, python_server, write_config

GATE = """import os
with open(os.environ["NEXO_TEST_PRELOAD_GATE"]) as gate:
    gate.read()
"""
"""A module the template imports last when it preloads: it waits until the probe opens the gate."""

FORK_TIME_AND_AUDIT = r"""
servers = {
    name: StdioServerConfig(transport="stdio", command=sys.executable, args=["-m", f"servers.{name}"])
    for name in ("time", "audit")
}
env = {"NEXO_STATE_DIR": str(state)}
fork_server = early_fork_server(servers, base_env=env, enabled=True)
assert fork_server is not None and fork_server.pid is not None
"""
"""Probe code: the time and audit servers' configs and a template forked for them (``state`` is set)."""

PROBE = (
    r"""
import json, os, sys
from pathlib import Path

import anyio

from orchestrator.lock import InstanceLock
from orchestrator.mesh import Mesh, StdioServerConfig
from orchestrator.mesh.mesh import early_fork_server, prestart
from shared import forkserver
from tests.mesh.harness import child_pids

state, gate_dir = Path(sys.argv[1]), sys.argv[2]
sys.path.insert(0, gate_dir)
forkserver.PRELOAD = (*forkserver.PRELOAD, "preload_gate")
"""
    + FORK_TIME_AND_AUDIT
    + r"""
template = fork_server.pid


def stat(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return []


def children() -> list[int]:
    # By parent, not by command line: a child just forked may not have renamed itself yet.
    found = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    return sorted(pid for pid in found if stat(pid)[1:2] == [str(template)])


def running(pid: int) -> bool:
    return stat(pid)[:1] not in ([], ["Z"])


with InstanceLock(state, config="probe"):
    asked = prestart(fork_server, servers, base_env=env)
    while_preloading = children()
    with open(os.environ["NEXO_TEST_PRELOAD_GATE"], "w"):
        pass  # the template finishes preloading, then starts what was asked

    async def main() -> dict[str, object]:
        async with Mesh({"time": servers["time"]}, base_env=env, fork_server=fork_server) as mesh:
            missing = await mesh.wait_ready(30.0)
            called = await mesh["time"].call_tool("now", {"timezone_name": "UTC"})
            in_loop = {"time": child_pids(template, "servers.time"), "all": children()}
        return {"missing": missing, "answered": not called.is_error, "in_loop": in_loop}

    seen = anyio.run(main)
after = [pid for pid in seen["in_loop"]["all"] if running(pid)]
print(json.dumps({"asked": asked, "while_preloading": while_preloading, **seen, "running_after": after}))
"""
)


def run_probe(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter from the project's root, as the commands start."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("fork-early")
    (work / "preload_gate.py").write_text(GATE)
    gate = work / "gate"
    os.mkfifo(gate)
    ran = run_probe(PROBE, str(work / "state"), str(work), env={"NEXO_TEST_PRELOAD_GATE": str(gate)})
    assert ran.returncode == 0, ran.stderr
    seen: dict[str, Any] = json.loads(ran.stdout)
    return seen


@pytest.mark.scenario
def test_asking_for_servers_before_the_event_loop_does_not_wait_for_the_template_to_preload(
    probe: dict[str, Any],
) -> None:
    assert (probe["asked"], probe["while_preloading"]) == (2, [])


@pytest.mark.scenario
def test_the_connection_adopts_the_server_started_early_instead_of_forking_another(
    probe: dict[str, Any],
) -> None:
    assert (probe["missing"], probe["answered"]) == ([], True)
    assert len(probe["in_loop"]["all"]) == 2
    assert len(probe["in_loop"]["time"]) == 1
    assert set(probe["in_loop"]["time"]) <= set(probe["in_loop"]["all"])


@pytest.mark.scenario
def test_a_server_started_early_that_no_connection_adopts_ends_with_the_mesh(probe: dict[str, Any]) -> None:
    assert probe["running_after"] == []


CLOSE_PROBE = (
    r"""
import json, os, sys, time
from pathlib import Path

from orchestrator.mesh import StdioServerConfig
from orchestrator.mesh.mesh import early_fork_server, prestart
from tests.mesh.terminal import processes_of

state, when, where = Path(os.environ["NEXO_STATE_DIR"]), sys.argv[1], sys.argv[2]
"""
    + FORK_TIME_AND_AUDIT
    + r"""
ours = {f"{os.getpid()}:", f"{fork_server.pid}:"}


def servers_running() -> list[str]:
    # Forked processes show the environment their template started with, which is this one's.
    return [line for line in processes_of(state) if line.split()[0] not in ours]


asked = prestart(fork_server, servers, base_env=env)
deadline = time.monotonic() + 30
while when == "once they run" and len(servers_running()) < asked and time.monotonic() < deadline:
    time.sleep(0.005)
before = len(servers_running())
if where == "before the event loop":
    fork_server.close()
else:
    import anyio

    async def stopped_at_once() -> None:
        # A Ctrl-C as the event loop starts: the mesh's scope is cancelled before any connection
        # asked the template for its server, and the fork server is left in a cancelled scope.
        with anyio.CancelScope() as scope:
            async with fork_server:
                scope.cancel()
                await anyio.sleep_forever()

    anyio.run(stopped_at_once)
print(json.dumps({"asked": asked, "before": before, "left": servers_running()}))
"""
)


@pytest.mark.parametrize("where", ["before the event loop", "as the event loop starts"])
@pytest.mark.parametrize("when", ["once they run", "while the template preloads"])
def test_a_start_given_up_early_leaves_no_server_it_asked_for(when: str, where: str, tmp_path: Path) -> None:
    """A Ctrl-C or an instance lock held elsewhere ends ``nexo run`` before its event loop, or a
    Ctrl-C as it starts, before any connection asked for its server: the servers asked of the
    template must be gone when it returns, not end some time later."""
    ran = run_probe(CLOSE_PROBE, when, where, env={"NEXO_STATE_DIR": str(tmp_path / "state")})
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert (seen["asked"], seen["left"]) == (2, [])
    if when == "once they run":
        assert seen["before"] == 2


PRELOAD_PROBE = r"""
import gc, json

from shared import forkserver

forkserver.PRELOAD = ("json",)  # what it preloads is beside the point, and the real list is slow
full = gc.get_stats()[2]["collections"]
forkserver.preload()
after = gc.get_stats()[2]["collections"]
print(json.dumps({"full_collections": after - full, "frozen": gc.get_freeze_count()}))
"""


def test_preloading_freezes_what_is_imported_without_walking_it_in_a_full_collection() -> None:
    ran = run_probe(PRELOAD_PROBE)
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["full_collections"] == 0
    assert seen["frozen"] > 0


FAILING_PRELOAD_PROBE = r"""
import json, logging, os, select, sys

import anyio

from orchestrator.mesh import StdioServerConfig
from orchestrator.mesh.mesh import early_fork_server, prestart
from orchestrator.mesh.transport import early_requests
from shared import forkserver

forkserver.PRELOAD = (*forkserver.PRELOAD, "no_such_module_to_preload")
servers = {
    name: StdioServerConfig(transport="stdio", command=sys.executable, args=["-m", "servers.time"])
    for name in ("time", "clock")  # a template is made for two built-in servers or more
}
fork_server = early_fork_server(servers, base_env={}, enabled=True)
assert fork_server is not None and fork_server.pid is not None
asked = prestart(fork_server, servers, base_env={})
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
# The template fails and exits before this process reads a word, with the requests unread: the
# kernel then reports a reset before it hands over the template's "failed" (as it may under load).
select.select([os.pidfd_open(fork_server.pid)], [], [], 30)  # readable once it has exited


async def main() -> dict[str, object]:
    request = early_requests(servers, {})[0]
    async with fork_server:
        adopted = await fork_server.adopt(request)
        forked = await fork_server.fork(request, (0, 1, 2))
    return {"asked": asked, "adopted": adopted is not None, "forked": forked is not None}


print(json.dumps(anyio.run(main)))
"""


@pytest.mark.scenario
def test_a_forked_template_that_cannot_preload_says_why_and_what_was_asked_of_it_is_spawned_instead() -> None:
    ran = run_probe(FAILING_PRELOAD_PROBE)
    assert ran.returncode == 0, ran.stderr
    # Neither adopted nor forked: the connection spawns the server as its own command.
    assert json.loads(ran.stdout) == {"asked": 2, "adopted": False, "forked": False}
    assert (
        "fork server: preloading failed (ModuleNotFoundError: No module named 'no_such_module_to_preload'); "
        "built-in servers are started as their own commands from now on"
    ) in ran.stderr


def probed(
    probe: str, tmp_path: Path, servers: dict[str, str], *, args: Sequence[str] = (), **config: Any
) -> Any:
    """What ``probe`` printed last, run in a fresh interpreter on a config with ``servers`` (name ->
    module) and the scripted model, given the config's path and then ``args``; it must exit 0."""
    with FakeLLM(default=Reply("ok")) as fake:
        path = write_config(
            tmp_path / "nexo.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=fake.openai_base_url,
            servers={name: python_server(module) for name, module in servers.items()},
            **config,
        )
        ran = run_probe(probe, str(path), *args)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout.splitlines()[-1])


GOAL_PROBE = r"""
import json, sys

from orchestrator.cli.main import main
from shared.forkserver import PRELOAD

code = main(["agent", "run", "hi", "--yes", "--config", sys.argv[1]])
print(json.dumps({"code": code, "imported": [name for name in PRELOAD if name in sys.modules]}))
"""


@pytest.mark.scenario
def test_agent_run_imports_all_it_preloads_before_the_fork_and_none_of_what_it_leaves_to_the_template(
    tmp_path: Path,
) -> None:
    # One server makes no template, so nothing is imported ahead: what is imported by the end of
    # the goal is what a foreground goal needs. What it preloads before the fork is what it would
    # import anyway; what it leaves to the template it would never import, so never holds twice.
    seen = probed(GOAL_PROBE, tmp_path, {"time": "servers.time"}, agent={"channels": []})
    assert seen == {"code": 0, "imported": [name for name in PRELOAD if name not in SERVERS_ONLY]}


DAEMON_PROBE = r"""
import json, os, signal, sys

from orchestrator import gc_pause
from shared.forkserver import PRELOAD

resume, seen = gc_pause.resume, {}


def at_ready(*, freeze: bool) -> None:
    if freeze and not seen:
        seen["imported"] = [name for name in PRELOAD if name in sys.modules]
        os.kill(os.getpid(), signal.SIGTERM)  # ready: stop as on a signal
    resume(freeze=freeze)


gc_pause.resume = at_ready
from orchestrator.cli.main import main

code = main(["run", "--config", sys.argv[1]])
print(json.dumps({"code": code, **seen}))
"""


@pytest.mark.scenario
def test_the_daemon_imports_all_it_preloads_before_the_fork_and_none_of_what_it_leaves_to_the_template(
    tmp_path: Path,
) -> None:
    # As for a foreground goal: one server (the console) makes no template, so what is imported
    # when the daemon is ready is what the daemon needs.
    seen = probed(DAEMON_PROBE, tmp_path, {"console": "channel_servers.console"})
    assert seen == {"code": 0, "imported": [name for name in PRELOAD if name not in DAEMON_LEAVES]}
