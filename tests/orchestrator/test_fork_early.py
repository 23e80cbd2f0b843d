"""Built-in servers started by the template before the event loop, then adopted by their connections.

One probe process plays ``nexo run``: it forks the template, takes the instance lock, asks the
template for the time and audit servers before its event loop exists, then runs a mesh of the time
server alone over that fork server. The time server's connection must adopt the process started
early (not fork a second one); the audit server, which no connection adopts, must end with the mesh.
Preloading, on the way to those servers, freezes what is imported without a full collection.
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
    started = prestart(fork_server, servers, base_env=env)
    before_loop = children()

    async def main() -> dict[str, object]:
        async with Mesh({"time": servers["time"]}, base_env=env, fork_server=fork_server) as mesh:
            missing = await mesh.wait_ready(30.0)
            called = await mesh["time"].call_tool("now", {"timezone_name": "UTC"})
            in_loop = {"time": child_pids(template, "servers.time"), "all": children()}
        return {"missing": missing, "answered": not called.is_error, "in_loop": in_loop}

    seen = anyio.run(main)
after = [pid for pid in before_loop if running(pid)]
print(json.dumps({"started": started, "before_loop": before_loop, **seen, "running_after": after}))
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
    assert len(probe["before_loop"]) == 2


@pytest.mark.scenario
def test_the_connection_adopts_the_server_started_early_instead_of_forking_another(
    probe: dict[str, Any],
) -> None:
    assert (probe["missing"], probe["answered"]) == ([], True)
    assert probe["in_loop"]["all"] == probe["before_loop"]
    assert len(probe["in_loop"]["time"]) == 1
    assert set(probe["in_loop"]["time"]) <= set(probe["before_loop"])


@pytest.mark.scenario
def test_a_server_started_early_that_no_connection_adopts_ends_with_the_mesh(probe: dict[str, Any]) -> None:
    assert probe["running_after"] == []


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
    ran = subprocess.run(
        [sys.executable, "-c", PRELOAD_PROBE],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["full_collections"] == 0
    assert seen["frozen"] > 0
