"""The running daemon's record of its state directory: used only when it gives what reading the
config would give, and only while its daemon holds it."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli.locate import state_dir
from orchestrator.state_location import RunningRecord, find_running, records_dir
from tests.mesh.harness import REPO

AGENTS = "agents:\n  - id: nexo\n    model: {provider: fake}\n"
LLM = "llm:\n  providers:\n    fake: {kind: openai_compat, base_url: 'http://127.0.0.1:9/v1', model: m}\n"
WAIT_S = 30


def _config(tmp_path: Path, state_line: str, name: str = "agents.yaml") -> Path:
    path = tmp_path / name
    path.write_text(state_line + LLM + AGENTS)
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A private records directory: the one ``$XDG_RUNTIME_DIR`` names."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    return {"XDG_RUNTIME_DIR": str(runtime)}


def test_a_running_daemons_record_gives_its_state_directory_and_goes_when_it_stops(
    tmp_path: Path, env: dict[str, str]
) -> None:
    config = _config(tmp_path, f"state_dir: {tmp_path / 'state'}\n")
    with RunningRecord(config, tmp_path / "state", env) as record:
        assert record.problem is None
        assert record.path is not None
        assert find_running(config, env) == tmp_path / "state"
        assert stat.S_IMODE(record.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(records_dir(env).stat().st_mode) == 0o700
    assert find_running(config, env) is None
    assert list(records_dir(env).iterdir()) == []


def test_a_config_edited_while_the_daemon_runs_is_read_again(tmp_path: Path, env: dict[str, str]) -> None:
    config = _config(tmp_path, f"state_dir: {tmp_path / 'state'}\n")
    with RunningRecord(config, tmp_path / "state", env):
        config.write_text(f"state_dir: {tmp_path / 'moved'}\n" + LLM + AGENTS)
        assert find_running(config, env) is None
        assert state_dir(str(config), env) == tmp_path / "moved"
        # Saved again unchanged (a new file, as editors write it): the record holds once more.
        config.unlink()
        _config(tmp_path, f"state_dir: {tmp_path / 'state'}\n")
        assert find_running(config, env) == tmp_path / "state"


def test_two_daemons_on_one_config_are_told_apart_by_the_environment_it_refers_to(
    tmp_path: Path, env: dict[str, str]
) -> None:
    config = _config(tmp_path, "state_dir: ${NEXO_STATE_DIR:-/srv/nexo}\n")
    first, second = (
        {**env, "NEXO_STATE_DIR": str(tmp_path / "a")},
        {**env, "NEXO_STATE_DIR": str(tmp_path / "b")},
    )
    with RunningRecord(config, tmp_path / "a", first), RunningRecord(config, tmp_path / "b", second):
        assert find_running(config, first) == tmp_path / "a"
        assert find_running(config, second) == tmp_path / "b"
        assert find_running(config, env) is None  # unset: /srv/nexo, where no daemon runs
        assert state_dir(str(config), env) == Path("/srv/nexo")


def test_the_built_in_defaults_are_recorded_like_a_file(env: dict[str, str], tmp_path: Path) -> None:
    ours = {**env, "NEXO_STATE_DIR": str(tmp_path / "state")}
    with RunningRecord(None, tmp_path / "state", ours):
        assert find_running(None, ours) == tmp_path / "state"
        assert find_running(None, {**ours, "NEXO_STATE_DIR": str(tmp_path / "other")}) is None


def test_a_relative_or_home_state_directory_holds_only_from_the_same_place(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    relative = _config(tmp_path, "state_dir: run/state\n", "relative.yaml")
    home = _config(tmp_path, "state_dir: ~/nexo-state\n", "home.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with (
        RunningRecord(relative, Path("run/state"), env),
        RunningRecord(home, tmp_path / "home/nexo-state", env),
    ):
        assert find_running(relative, env) == Path("run/state")
        assert find_running(home, env) == tmp_path / "home/nexo-state"
        monkeypatch.chdir(tmp_path / "runtime")
        monkeypatch.setenv("HOME", str(tmp_path))
        assert find_running(relative.absolute(), env) is None
        assert find_running(home, env) is None


def test_a_state_directory_from_a_secret_file_is_not_recorded(tmp_path: Path, env: dict[str, str]) -> None:
    secret = tmp_path / "where"
    secret.write_text(str(tmp_path / "state"))
    secret.chmod(0o600)
    config = _config(tmp_path, "state_dir: ${file:where}\n")
    with RunningRecord(config, tmp_path / "state", env) as record:
        assert record.problem == "its state_dir cannot be checked without the full load"
        assert find_running(config, env) is None
        assert state_dir(str(config), env) == tmp_path / "state"


def test_a_record_others_could_have_written_is_ignored(tmp_path: Path, env: dict[str, str]) -> None:
    config = _config(tmp_path, f"state_dir: {tmp_path / 'state'}\n")
    with RunningRecord(config, tmp_path / "state", env) as record:
        assert record.path is not None
        record.path.chmod(0o644)
        assert find_running(config, env) is None


def test_a_killed_daemons_record_is_ignored_and_swept_by_the_next_one(
    tmp_path: Path, env: dict[str, str]
) -> None:
    config = _config(tmp_path, f"state_dir: {tmp_path / 'state'}\n")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from orchestrator.state_location import RunningRecord\n"
            f"with RunningRecord(Path({str(config)!r}), Path({str(tmp_path / 'state')!r}), "
            f"{{'XDG_RUNTIME_DIR': {env['XDG_RUNTIME_DIR']!r}}}):\n"
            "    print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        assert find_running(config, env) == tmp_path / "state"
        os.kill(holder.pid, signal.SIGKILL)
        assert holder.wait(WAIT_S) == -signal.SIGKILL
    finally:
        holder.kill()
        holder.communicate(timeout=WAIT_S)
    (left,) = records_dir(env).iterdir()  # a SIGKILL leaves the file, and nobody holds it
    assert find_running(config, env) is None
    other = _config(tmp_path, f"state_dir: {tmp_path / 'other'}\n", "other.yaml")
    with RunningRecord(other, tmp_path / "other", env) as record:
        assert not left.exists()
        assert list(records_dir(env).iterdir()) == [record.path]
