"""The collector is off while `nexo run` and `nexo agent run` start, and on again, the start frozen,
once their servers are up; a command that ends before that leaves it on with nothing frozen.

Each probe runs in a fresh interpreter, as the commands start: a frozen start is for good.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from orchestrator.cli.main import main
from tests.fakes.llm import FakeLLM, Reply
from tests.mesh.harness import python_server, write_config
from tests.orchestrator.test_fork_early import run_probe

COUNTS = r"""
import gc, json, os, signal, sys

from orchestrator import gc_pause

def collections() -> int:
    return sum(generation["collections"] for generation in gc.get_stats())

seen: dict[str, object] = {}
resume = gc_pause.resume

def noted_resume(*, freeze: bool) -> None:
    if freeze and "at_ready" not in seen:
        seen.update(at_ready=collections(), enabled_before=gc.isenabled())
        resume(freeze=freeze)
        seen.update(enabled_after=gc.isenabled(), frozen=gc.get_freeze_count())
        if sys.argv[1] == "run":
            os.kill(os.getpid(), signal.SIGTERM)  # ready: the daemon stops as it would on a signal
    else:
        resume(freeze=freeze)

gc_pause.resume = noted_resume
from orchestrator.cli.main import main

seen["before"] = collections()  # from the command's first line (the entry point imports main first)
code = main([*sys.argv[1:-1], "--config", sys.argv[-1]])
seen.update(code=code, enabled_at_exit=gc.isenabled())
print(json.dumps(seen))
"""


def start_counts(tmp_path: Path, *command: str) -> dict[str, object]:
    with FakeLLM(default=Reply("ok")) as fake:
        config = write_config(
            tmp_path / "nexo.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=fake.openai_base_url,
            servers={"time": python_server("servers.time"), "audit": python_server("servers.audit")},
            agent={"channels": []},
            extra={"fork_server": True},
        )
        ran = run_probe(COUNTS, *command, str(config))
    assert ran.returncode == 0, ran.stderr
    seen: dict[str, object] = json.loads(ran.stdout.splitlines()[-1])
    return seen


@pytest.mark.parametrize("command", [("run",), ("agent", "run", "hi", "--yes")])
def test_a_start_makes_no_collection_and_collection_resumes_at_ready_with_the_start_frozen(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    seen = start_counts(tmp_path, *command)
    assert seen["code"] == 0
    # Hundreds of collections per start before the pause; none now, up to the servers being up.
    assert seen["at_ready"] == seen["before"]
    assert (seen["enabled_before"], seen["enabled_after"], seen["enabled_at_exit"]) == (False, True, True)
    assert isinstance(seen["frozen"], int)
    assert seen["frozen"] > 10_000


def test_a_command_that_ends_before_its_servers_are_up_leaves_collection_on_and_nothing_frozen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # In process, as the CLI tests call it: a worker left without collection would keep whatever
    # other tests leak in cycles, and a freeze would keep it for good.
    frozen = gc.get_freeze_count()
    with pytest.raises(SystemExit) as exited:
        main(["run", "--config", str(tmp_path / "missing.yaml")])
    assert exited.value.code != 0
    assert "missing.yaml" in capsys.readouterr().err
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


PRELOAD_PROBE = r"""
import gc, json

from shared import forkserver

forkserver.PRELOAD = ("email.message", "http.cookiejar", "xml.dom.minidom")
before = [generation["collections"] for generation in gc.get_stats()]
forkserver.preload()
after = [generation["collections"] for generation in gc.get_stats()]
print(json.dumps({"collections": [b - a for a, b in zip(before, after)], "enabled": gc.isenabled()}))
"""


def test_the_template_preloads_without_collecting_and_forks_its_servers_with_collection_on() -> None:
    ran = run_probe(PRELOAD_PROBE)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"collections": [0, 0, 0], "enabled": True}


HANDED_PROBE = r"""
import gc, json, socket, sys, threading
from pathlib import Path

from orchestrator.cli.main import main
from orchestrator.sockets import control_path

state, config = Path(sys.argv[1]), sys.argv[2]
state.mkdir(mode=0o700, parents=True, exist_ok=True)
listener = socket.socket(socket.AF_UNIX)
listener.bind(str(control_path(state)))
listener.listen()
seen = {}

def daemon() -> None:
    # Plays the running daemon: takes the goal, and answers once it has seen the command wait.
    conn, _ = listener.accept()
    with conn:
        conn.makefile().readline()
        seen["collecting_while_waiting"] = gc.isenabled()
        answer = {"outcome": "done", "text": "ok", "summary": "done", "goal_id": "g-1"}
        conn.sendall(json.dumps(answer).encode() + b"\n")

threading.Thread(target=daemon, daemon=True).start()
frozen = gc.get_freeze_count()
code = main(["agent", "run", "hi", "--config", config])
seen.update(code=code, frozen=gc.get_freeze_count() - frozen, enabled_at_exit=gc.isenabled())
print(json.dumps(seen))
"""


def test_a_goal_handed_to_the_running_daemon_waits_with_collection_on(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "nexo.yaml",
        state_dir=tmp_path / "state",
        llm_base_url="http://127.0.0.1:9/v1",
        servers={"time": python_server("servers.time")},
        agent={"channels": []},
    )
    ran = run_probe(HANDED_PROBE, str(tmp_path / "state"), str(config))
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout.splitlines()[-1])
    assert seen == {"collecting_while_waiting": True, "code": 0, "frozen": 0, "enabled_at_exit": True}
