"""nexo as its users run it: not root, from an installed copy, on Debian's own Python.

Root can enter a directory of mode 0600 and bubblewrap behaves differently for it, so permission
bugs hide when tests run as root. Here the default mesh runs as ``nobody`` (what the compose
image's uid 10001 is too), from a virtualenv built on ``/usr/bin/python3`` with the project
installed into it: the developer's virtualenv lives under root's home, which other users cannot read.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.llm import CallTool, FakeLLM, Reply, ScriptItem
from tests.mesh.harness import REPO

pytestmark = [
    pytest.mark.scenario,
    # The first test also builds the venv (about 45 s on an idle machine: pip installs from its cache).
    pytest.mark.timeout(600),
    pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root (CI runs as root)"),
]

SYSTEM_PYTHON = Path("/usr/bin/python3")
NOBODY = 65534
PROJECT_FILES = ("orchestrator", "servers", "channel_servers", "shared", "pyproject.toml", "README.md")
INSTALL_TIMEOUT_S = 600.0
RUN_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class UserInstall:
    root: Path
    """Readable by every user; holds the installed venv and the users' home directories."""
    nexo: Path
    build_log: str


def _check_system_python() -> None:
    probe = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys, ensurepip, venv; print(sys.version_info >= (3, 11))"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.stdout.strip() != "True":
        pytest.fail(
            f"{SYSTEM_PYTHON} must be Python >= 3.11 with the venv module ({probe.stderr.strip()}); "
            "install python3 and python3-venv, as .ci/run does"
        )


@pytest.fixture(scope="session")
def user_install() -> Iterator[UserInstall]:
    """The project installed (not editable) into a venv on the system Python, once per session; pip
    reuses its cache of the wheels the developer's venv was built from."""
    _check_system_python()
    root = Path(tempfile.mkdtemp(prefix="nexo-as-a-user-"))
    try:
        root.chmod(0o755)
        yield _install(root)
    finally:
        shutil.rmtree(root)


def _install(root: Path) -> UserInstall:
    source = root / "src"
    for name in PROJECT_FILES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, source / name)
    venv = root / "venv"
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", str(venv)], check=True, timeout=INSTALL_TIMEOUT_S)
    built = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--verbose", str(source)],
        capture_output=True,
        text=True,
        check=False,
        timeout=INSTALL_TIMEOUT_S,
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    return UserInstall(root, venv / "bin" / "nexo", built.stdout + built.stderr)


def _private_home(install: UserInstall, name: str) -> Path:
    home = install.root / name
    home.mkdir(mode=0o700)
    os.chown(home, NOBODY, NOBODY)
    return home


def _as_nobody(*argv: str, env: dict[str, str], cwd: Path, stdin: str) -> subprocess.CompletedProcess[str]:
    """``argv`` as uid/gid 65534 with only the given environment; setpriv and env exec in place."""
    switch = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "env", "-i"]
    variables = [f"{key}={value}" for key, value in {"PATH": "/usr/bin:/bin", **env}.items()]
    return subprocess.run(
        [*switch, *variables, *argv],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def _directories(state: Path, workspace: Path) -> dict[str, tuple[str, int]]:
    """Every directory of the state tree (not inside the workspace): its mode and owner."""
    found = {}
    for directory, subdirectories, _ in os.walk(state):
        info = Path(directory).stat()
        found[directory] = (f"{stat.S_IMODE(info.st_mode):04o}", info.st_uid)
        if Path(directory) == workspace:
            subdirectories.clear()
    return found


def test_the_project_builds_without_setuptools_warnings(user_install: UserInstall) -> None:
    assert "Building wheel for nexo" in user_install.build_log
    assert "BuildBackendWarning" not in user_install.build_log
    assert "SetuptoolsDeprecationWarning" not in user_install.build_log
    assert "project.license" not in user_install.build_log


def test_an_ordinary_user_chats_with_the_default_mesh_and_the_shell_is_sandboxed(
    user_install: UserInstall,
) -> None:
    home = _private_home(user_install, "operator-home")
    state = home / "state"
    # What an earlier run under the old umask left behind: a directory its owner cannot enter.
    for path in (state, state / "memory"):
        path.mkdir(mode=0o700)
        os.chown(path, NOBODY, NOBODY)
    (state / "memory").chmod(0o600)
    script: list[ScriptItem] = [CallTool("workspace__workspace_info", {}), Reply("the shell is confined")]
    with FakeLLM(script) as fake:
        result = _as_nobody(
            str(user_install.nexo),
            "run",
            "--chat",
            env={"HOME": str(home), "NEXO_STATE_DIR": str(state), "NEXO_LLM_BASE_URL": fake.openai_base_url},
            cwd=home,
            stdin="Is the shell sandboxed?\n",
        )
        requests = fake.requests
    log = (state / "nexo.log").read_text()
    assert result.returncode == 0, result.stderr + log
    assert result.stdout == "the shell is confined\n"
    assert f"nexo: repaired state directory {state / 'memory'}" in result.stderr
    assert "Permission denied" not in log
    assert "Traceback" not in log + result.stderr
    assert "nexo ready: 7 servers" in log
    directories = _directories(state, state / "workspace")
    assert directories == dict.fromkeys(directories, ("0700", NOBODY))
    assert {Path(d).name for d in directories} >= {"state", "audit", "console", "cron", "memory", "pairing"}
    [(_, info, is_error)] = requests[1].tool_results
    expected = "bwrap" if shutil.which("bwrap") else "none"
    assert (is_error, json.loads(info)["sandbox"]) == (False, expected), info
