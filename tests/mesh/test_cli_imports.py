"""One-shot commands against a running mesh stay light: they never import the MCP SDK or the mesh,
``nexo pair``, ``nexo agent ps``, ``nexo audit tail``, ``nexo cron list``, ``nexo dlq`` and ``nexo
autonomy status`` no pydantic either, and ``nexo chat`` not even an event loop library or a YAML parser.

Each command runs under ``python -X importtime``, whose report (on stderr) names every module the
process imported; the command's own output is checked too, so a command that failed early (and
so imported little) cannot pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM, Reply
from tests.mesh.harness import REPO, base_env, python_server, running, write_config

pytestmark = pytest.mark.scenario

HEAVY = ("mcp", "mcp_types", "httpx2", "orchestrator.mesh", "orchestrator.llm", "orchestrator.config")
"""What a command that only talks to the daemon's sockets must not pay for."""
CHAT_NEVER = ("pydantic", "anyio", "asyncio", "yaml", "mcp", "typing", "logging", "dataclasses")
"""``nexo chat`` against a running daemon: a blocking client that finds the state directory in the
daemon's record, so no event loop library, no YAML parser, no models (and none of what a
one-shot command can do without: typing, logging, dataclasses)."""


def _traced(*args: str, stdin: str = "") -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``nexo ARGS`` with import tracing: the result (trace lines removed) and the modules imported."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "orchestrator.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=base_env(),
        cwd=REPO,
        timeout=60,
        check=False,
    )
    trace = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    modules = {line.rsplit("|", 1)[1].strip() for line in trace[1:]}  # the first line is the header
    result.stderr = "\n".join(
        line for line in result.stderr.splitlines() if not line.startswith("import time:")
    )
    return result, modules


def _heavy(modules: set[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(f"{h}.") for h in heavy))


def _command_modules(modules: set[str]) -> list[str]:
    """The ``orchestrator.cli`` modules among ``modules``, without the prefix."""
    return sorted(m.removeprefix("orchestrator.cli.") for m in modules if m.startswith("orchestrator.cli."))


def test_one_shot_commands_against_a_running_mesh_import_neither_mcp_nor_the_mesh(
    tmp_path: Path,
) -> None:
    """``agent run`` hands its goal to the running daemon (whose servers are up) instead of starting
    its own, and ``pair`` and ``agent ps`` their requests to the daemon's pairing and audit servers:
    the same answers, none of the weight, and no server of their own."""
    with FakeLLM(default=Reply("hello back")) as llm:
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=llm.openai_base_url,
            servers={
                "console": python_server("channel_servers.console"),
                "pairing": python_server("servers.pairing"),
                "audit": python_server("servers.audit"),
                "cron": python_server("servers.cron"),
            },
        )
        with running(config):
            chat, chat_modules = _traced("chat", "--config", str(config), "--timeout", "30", stdin="hi\n")
            status, status_modules = _traced("status", "--config", str(config))
            agent, agent_modules = _traced("agent", "run", "hi", "--config", str(config))
            ps, ps_modules = _traced("agent", "ps", "--all", "--config", str(config))
            seed, seed_modules = _traced(
                "pair", "seed", "console", "default", "alice", "--config", str(config)
            )
            listed, list_modules = _traced("pair", "list", "--config", str(config))
            username, _ = _traced("pair", "seed", "telegram", "default", "@bob", "--config", str(config))
            autonomy, autonomy_modules = _traced("autonomy", "status", "--json", "--config", str(config))
            tail, tail_modules = _traced("audit", "tail", "--kind", "goal", "--json", "--config", str(config))
            crons, cron_modules = _traced("cron", "list", "--config", str(config))
            doctor, doctor_modules = _traced("setup", "doctor", "--config", str(config))
            dead, dead_modules = _traced("dlq", "list", "--config", str(config))
    assert (chat.returncode, chat.stdout) == (0, "hello back\n"), chat.stderr
    assert status.returncode == 0, status.stderr
    servers = {line.split()[0]: line.split()[1:4] for line in status.stdout.splitlines()[2:5]}
    assert servers["console"] == ["stdio", "ready", "1"]
    assert _heavy(chat_modules) == []
    assert _heavy(chat_modules, CHAT_NEVER) == []
    assert _heavy(status_modules) == []
    assert "pydantic" not in status_modules  # it reads the daemon's record and validates nothing
    assert "yaml" not in status_modules
    # The parser is built for the named command only: no other command's module is imported.
    assert _command_modules(status_modules) == ["common", "locate", "status"]
    assert _command_modules(chat_modules) == ["chat", "chat_view", "common", "locate"]
    assert (agent.returncode, agent.stdout) == (0, "hello back\n"), agent.stderr
    assert "in the running nexo]" in agent.stderr
    assert _heavy(agent_modules) == []
    assert "yaml" not in agent_modules
    assert ps.returncode == 0, ps.stderr
    goals = sorted((row[1], row[2], row[-1]) for row in map(str.split, ps.stdout.splitlines()[2:]))
    assert goals == [("bg", "done", "hi"), ("interactive", "done", "hi")]  # agent run's, chat's
    assert _heavy(ps_modules) == []
    assert "pydantic" not in ps_modules
    assert (seed.returncode, seed.stdout) == (0, "seeded 1 (1 changed) on console\n"), seed.stderr
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split("(via")[0].split() == ["console:default", "dm", "contact", "alice"]
    for modules in (seed_modules, list_modules):
        assert _heavy(modules) == []
        assert "pydantic" not in modules
    # The platform comes from the daemon's config: a Telegram channel's ids are numeric.
    assert username.returncode == 1
    assert "is a Telegram username" in username.stderr, username.stderr
    assert autonomy.returncode == 0, autonomy.stderr
    assert json.loads(autonomy.stdout)["enabled"] is True
    assert _heavy(autonomy_modules) == []
    assert "pydantic" not in autonomy_modules
    assert tail.returncode == 0, tail.stderr
    statuses = [entry["body"]["status"] for entry in json.loads(tail.stdout)]
    assert statuses.count("done") == 2  # chat's goal and agent run's
    assert (crons.returncode, crons.stdout) == (0, "no cron entries\n"), crons.stderr
    assert (dead.returncode, dead.stdout) == (0, "no dead letters\n"), dead.stderr
    for modules in (tail_modules, cron_modules, dead_modules):
        assert _heavy(modules) == []
        assert "pydantic" not in modules
    # The doctor validates the config, and asks the daemon for every server it holds: no SDK.
    assert doctor.returncode in (0, 2), doctor.stderr
    assert "asked through the running nexo" in doctor.stdout
    assert _heavy(doctor_modules, ("mcp", "mcp_types", "orchestrator.mesh.mesh")) == []
