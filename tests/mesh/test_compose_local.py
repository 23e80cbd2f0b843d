"""compose.yaml run as local processes: exactly the commands and environment it declares, read from the
file (so the test cannot drift from it), with a chat round trip, a tool call and a restart of one
service. Only what a container gives and a local machine cannot is changed: each service's port 8080
becomes a free loopback port (five services cannot share one locally), the volumes become one state
directory and one 0600 token file, and the service names in the orchestrator's config become those
loopback addresses."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, Reply, ScriptItem
from tests.mesh.harness import REPO, chat, free_port, running, stop
from tests.test_compose import TOKEN_PATH, compose_config

pytestmark = pytest.mark.scenario
READY_S = 90.0
CONTAINER_BIND = "0.0.0.0:8080"
STATE_IN_CONTAINER = "/var/lib/nexo"


class Service:
    """One server service as a local process: its command (``nexo ...`` as this interpreter's
    ``nexo``) and its environment, with the port, state directory and token file of this run."""

    def __init__(self, name: str, service: dict[str, Any], port: int, state: Path, token: Path) -> None:
        command = [sys.executable, "-m", "orchestrator.cli.main", *service["command"][1:]]
        assert command.count(CONTAINER_BIND) == 1, command
        command[command.index(CONTAINER_BIND)] = f"127.0.0.1:{port}"
        env = dict(service["environment"])
        assert env.pop("NEXO_STATE_DIR") == STATE_IN_CONTAINER
        assert env.pop("NEXO_SERVER_TOKEN_FILE") == TOKEN_PATH
        env.update(PATH="/usr/bin:/bin", NEXO_STATE_DIR=str(state), NEXO_SERVER_TOKEN_FILE=str(token))
        self.name = name
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.process = subprocess.Popen(
            command,
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            if "serving MCP over HTTP at" in line:
                self.ready.set()
        self.ready.set()

    def wait_ready(self) -> None:
        assert self.ready.wait(READY_S), f"{self.name}: {''.join(self.lines)}"
        assert self.process.poll() is None, f"{self.name}: {''.join(self.lines)}"

    def stop(self) -> None:
        stop(self.process)
        self.reader.join(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()


def _orchestrator_config(tmp_path: Path, ports: dict[str, int], state: Path, token: Path) -> Path:
    text = (REPO / "config" / "compose.yaml").read_text().replace(TOKEN_PATH, str(token))
    text = text.replace(f"state_dir: {STATE_IN_CONTAINER}", f"state_dir: {state}")
    for name, port in ports.items():
        text, replaced = re.subn(rf"http://{name}:8080/mcp", f"http://127.0.0.1:{port}/mcp", text)
        assert replaced == 1, name
    path = tmp_path / "agents.yaml"
    path.write_text(text)
    return path


def _now(request: RecordedRequest) -> Reply:
    (_, content, is_error), *_ = request.tool_results
    assert not is_error, content
    return Reply(f"UTC offset {json.loads(content)['utc_offset']}")


def test_the_services_of_compose_yaml_run_locally_answer_a_chat_call_a_tool_and_survive_a_restart(
    tmp_path: Path,
) -> None:
    services = compose_config()["services"]
    servers = {name: s for name, s in services.items() if s["command"][:2] == ["nexo", "serve"]}
    orchestrator = services["orchestrator"]
    assert orchestrator["command"] == ["nexo", "run", "--config", "/etc/nexo/agents.yaml"]
    state, token = tmp_path / "state", tmp_path / "token"
    state.mkdir(mode=0o700)
    token.write_text("compose-local-token")
    token.chmod(0o600)
    ports = {name: free_port() for name in servers}
    script: list[ScriptItem] = [
        Reply("hello from compose"),
        CallTool("time__now", {"timezone_name": "UTC"}),
        _now,
        CallTool("time__now", {"timezone_name": "UTC"}),
        _now,
    ]
    with FakeLLM(script) as llm, ExitStack() as stack:
        started = {
            name: Service(name, service, ports[name], state, token) for name, service in servers.items()
        }
        for service in started.values():
            stack.callback(service.stop)
        for service in started.values():
            service.wait_ready()
        config = _orchestrator_config(tmp_path, ports, state, token)
        env = {k: v for k, v in orchestrator["environment"].items() if k != "NEXO_STATE_DIR"}
        env.update(
            NEXO_LLM_BASE_URL=llm.openai_base_url, NEXO_LLM_MODEL="scripted", NEXO_STATE_DIR=str(state)
        )
        with running(config, env=env) as orch:
            hello = chat(config, "hello")
            first = chat(config, "what is the UTC offset?")
            started["time"].stop()
            restarted = Service("time", servers["time"], ports["time"], state, token)
            stack.callback(restarted.stop)
            restarted.wait_ready()
            again = chat(config, "and now?")
            assert orch.process.poll() is None
    assert (hello.returncode, hello.stdout) == (0, "hello from compose\n"), hello.stderr
    assert (first.returncode, first.stdout) == (0, "UTC offset +0\n"), first.stderr
    assert (again.returncode, again.stdout) == (0, "UTC offset +0\n"), again.stderr
