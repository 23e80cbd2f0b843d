"""Operator commands with no daemon fork the built-in servers they start from a template of the
command itself, not as second interpreters: the one server of ``nexo pair``, ``nexo cron``, ``nexo
audit`` and ``nexo memory``; every server ``nexo channel list``, ``nexo dlq``, ``nexo setup doctor``
and ``nexo run --check-config`` ask.

A probe plays the command in a fresh interpreter and looks at the process table while the command's
request is on its way (or as each connection opens): the server must be a child of a template (``-m
shared.forkserver``) that is the command's own child; a server spawned as its own command would be
the command's child."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from orchestrator.cli.direct import daemon_listening
from orchestrator.sockets import control_path
from tests.orchestrator.test_fork_early import probed

DIRECT_PROBE = r"""
import json, os, sys

from orchestrator.cli.main import main
from orchestrator.mesh.connection import ServerConnection
from tests.mesh.harness import FORK_SERVER, process_table

seen = {}
request = ServerConnection.request


async def watched(self, *args, **kwargs):
    table, me = process_table(), os.getpid()
    mine = {pid: entry for pid, entry in table.items() if me in (entry[0], table.get(entry[0], (0, ""))[0])}
    seen["servers"] = [
        {"via_template": FORK_SERVER in table[ppid][1], "child_of_command": ppid == me}
        for pid, (ppid, cmdline) in mine.items()
        if f"-m servers.{self.name}" in cmdline
    ]
    return await request(self, *args, **kwargs)


ServerConnection.request = watched
code = main([*sys.argv[2:], "--config", sys.argv[1]])
print(json.dumps({"code": code, **seen}))
"""


SERVERS = {
    "console": "channel_servers.console",
    "pairing": "servers.pairing",
    "cron": "servers.cron",
    "audit": "servers.audit",
    "memory": "servers.memory",
}


@pytest.mark.scenario
@pytest.mark.parametrize(
    "command",
    [["pair", "seed", "console", "default", "42"], ["cron", "list"], ["audit", "tail"], ["memory", "stats"]],
    ids=["pair", "cron", "audit", "memory"],
)
def test_a_direct_command_forks_its_server_from_a_template_of_itself(
    tmp_path: Path, command: list[str]
) -> None:
    seen = probed(DIRECT_PROBE, tmp_path, SERVERS, args=command)
    assert seen == {"code": 0, "servers": [{"via_template": True, "child_of_command": False}]}


@pytest.mark.scenario
def test_with_fork_server_off_a_direct_command_spawns_its_server(tmp_path: Path) -> None:
    seen = probed(DIRECT_PROBE, tmp_path, SERVERS, args=["cron", "list"], extra={"fork_server": False})
    assert seen == {"code": 0, "servers": [{"via_template": False, "child_of_command": True}]}


OPENING_PROBE = r"""
import json, os, sys

from orchestrator.cli.main import main
from orchestrator.mesh.connection import ServerConnection
from tests.mesh.harness import FORK_SERVER, process_table

seen = {}
opened = ServerConnection._open


async def watched(self, stack):
    client = await opened(self, stack)
    table, me = process_table(), os.getpid()
    command = " ".join(self.config.args[:2])
    seen[self.name] = [
        {"via_template": FORK_SERVER in table[ppid][1], "child_of_command": ppid == me}
        for pid, (ppid, cmdline) in table.items()
        if command in cmdline and me in (ppid, table.get(ppid, (0, ""))[0])
    ]
    return client


ServerConnection._open = watched
code = main([*sys.argv[2:], "--config", sys.argv[1]])
print(json.dumps({"code": code, "servers": seen}))
"""
FORKED = [{"via_template": True, "child_of_command": False}]


@pytest.mark.scenario
@pytest.mark.parametrize(
    ("command", "asked"),
    [
        (["channel", "list"], sorted(SERVERS)),
        (["dlq", "list"], ["console"]),
        (["setup", "doctor"], ["console", "pairing"]),
        (["run", "--check-config"], sorted(SERVERS)),
    ],
    ids=["channel-list", "dlq", "setup-doctor", "check-config"],
)
def test_a_command_that_starts_several_servers_forks_each_from_a_template_of_itself(
    tmp_path: Path, command: list[str], asked: list[str]
) -> None:
    seen = probed(OPENING_PROBE, tmp_path, SERVERS, args=command)
    assert seen == {"code": 0, "servers": dict.fromkeys(asked, FORKED)}


def test_a_daemon_is_listening_only_when_its_control_socket_accepts(tmp_path: Path) -> None:
    assert not daemon_listening(tmp_path)  # no socket at all
    path = control_path(tmp_path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as left_behind:
        left_behind.bind(str(path))  # bound, never listening: a daemon that is gone
        assert not daemon_listening(tmp_path)
    path.unlink()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as daemon:
        daemon.bind(str(path))
        daemon.listen(1)
        assert daemon_listening(tmp_path)
