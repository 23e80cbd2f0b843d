"""Built-in servers started by the template before the event loop, then adopted by their connections.

One probe process plays ``nexo run``: it forks the template, takes the instance lock, asks the
template for the time and audit servers before its event loop exists, then runs a mesh of the time
server alone over that fork server. The time server's connection must adopt the process started
early (not fork a second one); the audit server, which no connection adopts, must end with the mesh.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.mesh.harness import REPO

PROBE = r"""
import json, sys
from pathlib import Path

import anyio

from orchestrator.lock import InstanceLock
from orchestrator.mesh import Mesh, StdioServerConfig
from orchestrator.mesh.mesh import early_fork_server, prestart
from tests.mesh.harness import child_pids

state = Path(sys.argv[1])
servers = {
    name: StdioServerConfig(transport="stdio", command=sys.executable, args=["-m", f"servers.{name}"])
    for name in ("time", "audit")
}
env = {"NEXO_STATE_DIR": str(state)}
fork_server = early_fork_server(servers, base_env=env, enabled=True)
assert fork_server is not None and fork_server.pid is not None
template = fork_server.pid


def running() -> dict[str, list[int]]:
    return {name: child_pids(template, f"servers.{name}") for name in servers}


with InstanceLock(state, config="probe"):
    started = prestart(fork_server, servers, base_env=env)
    before_loop = running()

    async def main() -> dict[str, object]:
        async with Mesh({"time": servers["time"]}, base_env=env, fork_server=fork_server) as mesh:
            missing = await mesh.wait_ready(30.0)
            called = await mesh["time"].call_tool("now", {"timezone_name": "UTC"})
            in_loop = running()
        return {"missing": missing, "answered": not called.is_error, "in_loop": in_loop}

    seen = anyio.run(main)
print(json.dumps({"started": started, "before_loop": before_loop, **seen, "after": running()}))
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    state = tmp_path_factory.mktemp("fork-early") / "state"
    ran = subprocess.run(
        [sys.executable, "-c", PROBE, str(state)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    seen: dict[str, Any] = json.loads(ran.stdout)
    return seen


@pytest.mark.scenario
def test_servers_asked_for_before_the_event_loop_are_running_before_it(probe: dict[str, Any]) -> None:
    assert probe["started"] == 2
    assert [len(probe["before_loop"][name]) for name in ("time", "audit")] == [1, 1]


@pytest.mark.scenario
def test_the_connection_adopts_the_server_started_early_instead_of_forking_another(
    probe: dict[str, Any],
) -> None:
    assert (probe["missing"], probe["answered"]) == ([], True)
    assert probe["in_loop"]["time"] == probe["before_loop"]["time"]


@pytest.mark.scenario
def test_a_server_started_early_that_no_connection_adopts_ends_with_the_mesh(probe: dict[str, Any]) -> None:
    assert probe["in_loop"]["audit"] == probe["before_loop"]["audit"]
    assert probe["after"] == {"time": [], "audit": []}
