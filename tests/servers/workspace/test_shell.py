"""The shell tool without a sandbox: refusals, environment, timeouts, output caps, sandbox choice."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from servers.workspace.sandbox import UNCONFINED_WARNING
from servers.workspace.settings import SandboxMode, WorkspaceSettings
from servers.workspace.shell import check_command
from tests.servers.workspace.conftest import call, connected, exists, names, refused, wait_gone

pytestmark = pytest.mark.anyio

SED_REFUSAL = (
    "`sed -i` (in-place editing) is refused: change files with edit_file (an exact replacement) or "
    "write_file, which stay inside the workspace and write atomically"
)


async def test_a_command_runs_in_the_root_and_says_it_is_unconfined(
    settings: WorkspaceSettings, root: Path
) -> None:
    async with connected(settings) as client:
        result = await call(client, "shell", command="pwd; echo oops >&2; exit 3")
    duration = result.pop("duration_ms")
    assert result == {
        "exit_code": 3,
        "stdout": f"{root}\n",
        "stderr": "oops\n",
        "stdout_bytes": len(f"{root}\n"),
        "stderr_bytes": 5,
        "timed_out": False,
        "truncated": False,
        "sandbox": "none",
        "warning": UNCONFINED_WARNING,
    }
    assert 0 <= duration < 10_000


@pytest.mark.parametrize(
    "command",
    [
        "sed -i 's/a/b/' notes.txt",
        "sed -Ei 's/a/b/' notes.txt",
        "sed -n -i.bak p notes.txt",
        "sed 's/a/b/' -i notes.txt",
        "sed --in-place 's/a/b/' notes.txt",
        "sed --in-pl=.orig 's/a/b/' notes.txt",
        "cat notes.txt | sed -i 's/a/b/' notes.txt",
        "true && /usr/bin/sed -i 's/a/b/' notes.txt",
        "find . -name '*.txt' -exec gsed -i s/a/b/ {} +",
    ],
)
async def test_sed_in_place_is_refused_before_anything_runs(
    settings: WorkspaceSettings, root: Path, command: str
) -> None:
    (root / "notes.txt").write_text("a\n")
    async with connected(settings) as client:
        message = await refused(client, "shell", command=f"touch ran; {command}")
    assert message == SED_REFUSAL
    assert names(root) == ["notes.txt"]
    assert (root / "notes.txt").read_text() == "a\n"


@pytest.mark.parametrize(
    "command",
    ["sed -n 's/a/b/p' notes.txt", "sed -e 's/-i/x/' notes.txt", "sed 's/x/y/i' f", "grep -i sed notes.txt"],
)
def test_other_sed_and_grep_uses_are_allowed(command: str) -> None:
    check_command(command)


async def test_oversized_empty_and_nul_commands_are_refused(settings: WorkspaceSettings) -> None:
    async with connected(settings) as client:
        huge = await refused(client, "shell", command="echo " + "x" * 16_380)
        empty = await refused(client, "shell", command="   ")
        nul = await refused(client, "shell", command="echo a\x00b")
        slow = await refused(client, "shell", command="true", timeout_s=601)
        zero = await refused(client, "shell", command="true", timeout_s=0)
    assert huge == (
        "command is 16385 bytes; the limit is 16384. Write a long script to a file with write_file and "
        "run that file instead"
    )
    assert empty == "command is empty; give a shell command line such as 'ls -la'"
    assert nul == "command contains a NUL byte, which no shell command line can carry; remove it"
    assert slow == (
        "timeout_s must be above 0 and at most 600 seconds (NEXO_WORKSPACE_SHELL_TIMEOUT_MAX_S); got 601.0"
    )
    assert zero.startswith("timeout_s must be above 0")


async def test_the_environment_carries_nothing_from_the_server(
    settings: WorkspaceSettings, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEXO_CANARY_SECRET", "do-not-leak")
    async with connected(settings) as client:
        result = await call(client, "shell", command="env")
    variables = dict(line.split("=", 1) for line in result["stdout"].splitlines())
    assert "do-not-leak" not in result["stdout"]
    assert {k: variables[k] for k in ("PATH", "HOME", "LANG")} == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(root),
        "LANG": "C.UTF-8",
    }
    # Anything else is what /bin/sh itself sets (PWD, maybe SHLVL), never inherited.
    assert set(variables) - {"PATH", "HOME", "LANG"} <= {"PWD", "OLDPWD", "SHLVL", "_"}


async def test_stdin_is_empty(settings: WorkspaceSettings) -> None:
    async with connected(settings) as client:
        with anyio.fail_after(10):
            result = await call(client, "shell", command="cat; echo done", timeout_s=5)
    assert (result["stdout"], result["exit_code"], result["timed_out"]) == ("done\n", 0, False)


async def test_a_timeout_kills_the_whole_process_group_even_when_it_ignores_sigterm(
    settings: WorkspaceSettings,
) -> None:
    command = "trap '' TERM; echo $$; sh -c 'trap \"\" TERM; echo $$; exec sleep 30' & wait"
    async with connected(settings) as client:
        with anyio.fail_after(10):
            result = await call(client, "shell", command=command, timeout_s=1)
            pids = [int(line) for line in result["stdout"].split()]
            for pid in pids:
                await wait_gone(pid)
    assert (result["timed_out"], result["exit_code"]) == (True, None)
    assert 1_000 <= result["duration_ms"] < 9_000
    assert len(pids) == 2


async def test_background_processes_end_with_the_command(settings: WorkspaceSettings) -> None:
    async with connected(settings) as client:
        with anyio.fail_after(10):
            result = await call(client, "shell", command="sleep 30 & echo $!", timeout_s=20)
            await wait_gone(int(result["stdout"]))
    assert (result["exit_code"], result["timed_out"]) == (0, False)
    assert result["duration_ms"] < 9_000


async def test_output_keeps_the_head_of_each_stream_and_says_how_much_was_cut(tmp_path: Path) -> None:
    settings = WorkspaceSettings(state_dir=tmp_path / "state", sandbox="none", max_output_bytes=1000)
    command = "head -c 100000 /dev/zero | tr '\\0' a; head -c 1500 /dev/zero | tr '\\0' b >&2"
    async with connected(settings) as client:
        result = await call(client, "shell", command=command)
        small = await call(client, "shell", command="printf 'héllo'")
    assert result["stdout"] == "a" * 1000 + "\n[... 99000 more bytes cut]"
    assert result["stderr"] == "b" * 1000 + "\n[... 500 more bytes cut]"
    assert (result["stdout_bytes"], result["stderr_bytes"], result["truncated"]) == (100_000, 1_500, True)
    assert (small["stdout"], small["truncated"]) == ("héllo", False)


async def test_a_multibyte_character_split_by_the_cap_is_dropped_not_mangled(tmp_path: Path) -> None:
    settings = WorkspaceSettings(state_dir=tmp_path / "state", sandbox="none", max_output_bytes=4)
    async with connected(settings) as client:
        result = await call(client, "shell", command="printf 'abcé!'")
    assert result["stdout"] == "abc\n[... 3 more bytes cut]"


@pytest.mark.parametrize(
    ("mode", "program", "reason"),
    [
        ("auto", "/nonexistent/bwrap", "'/nonexistent/bwrap' is not an executable on PATH"),
        ("bwrap", "/nonexistent/bwrap", "'/nonexistent/bwrap' is not an executable on PATH"),
        ("auto", "false", "/usr/bin/false failed its start-up check (exit status 1)"),
    ],
)
async def test_without_a_working_sandbox_the_shell_is_not_offered(
    tmp_path: Path, mode: SandboxMode, program: str, reason: str
) -> None:
    settings = WorkspaceSettings(state_dir=tmp_path / "state", sandbox=mode, bwrap=program)
    async with connected(settings) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        attempt = await client.call_tool("shell", {"command": "touch ran"})
        info = await call(client, "workspace_info")
    assert "shell" not in tools
    assert {"read_file", "write_file", "edit_file", "workspace_info"} <= tools
    assert attempt.is_error is True
    assert (info["sandbox"], info["sandbox_mode"], info["shell"]) == ("none", mode, False)
    assert info["warning"] == (
        f"the shell tool is not offered: bubblewrap cannot sandbox commands ({reason}); install "
        "bubblewrap (`sudo apt-get install bubblewrap`) and restart nexo, or set "
        "NEXO_WORKSPACE_SANDBOX=none to run commands unconfined"
    )
    assert not exists(settings.workspace / "ran")


async def test_unconfined_commands_run_only_when_the_operator_chose_sandbox_none(tmp_path: Path) -> None:
    settings = WorkspaceSettings(state_dir=tmp_path / "state", sandbox="none", bwrap="false")
    async with connected(settings) as client:
        info = await call(client, "workspace_info")
        result = await call(client, "shell", command="echo ran")
    assert (info["sandbox"], info["shell"], info["warning"]) == ("none", True, UNCONFINED_WARNING)
    assert info["sandbox_reason"] == "disabled by NEXO_WORKSPACE_SANDBOX=none"
    assert (result["stdout"], result["sandbox"], result["warning"]) == ("ran\n", "none", UNCONFINED_WARNING)
