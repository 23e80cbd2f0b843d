"""Shell commands inside bubblewrap: what they can see, write and reach. These run the real bwrap."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest

from servers.workspace.sandbox import bwrap_argv, system_mounts
from servers.workspace.settings import WorkspaceSettings
from tests.servers.workspace.conftest import (
    call,
    connected,
    exists,
    killed_afterwards,
    names,
    needs_bwrap,
    sleepers,
    survivors,
    wait_gone,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def sandboxed(tmp_path: Path) -> WorkspaceSettings:
    settings = WorkspaceSettings(state_dir=tmp_path / "state", sandbox="bwrap")
    settings.workspace.mkdir(mode=0o700, parents=True)
    return settings


def test_system_directories_are_mirrored_as_the_host_has_them(tmp_path: Path) -> None:
    host = tmp_path / "host"
    for directory in ("usr/bin", "usr/lib", "sbin", "etc/ld.so.conf.d"):
        (host / directory).mkdir(parents=True)
    (host / "bin").symlink_to("usr/bin")
    (host / "lib").symlink_to("usr/lib")
    (host / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    assert system_mounts(host) == [
        "--ro-bind", str(host / "usr"), "/usr",
        "--symlink", "usr/bin", "/bin",
        "--ro-bind", str(host / "sbin"), "/sbin",
        "--symlink", "usr/lib", "/lib",
        "--ro-bind", str(host / "etc/ld.so.conf.d"), "/etc/ld.so.conf.d",
        "--ro-bind", str(host / "etc/passwd"), "/etc/passwd",
    ]  # fmt: skip


def test_the_command_line_binds_only_the_workspace_writable_and_clears_the_environment(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    argv = bwrap_argv(
        "/usr/bin/bwrap",
        root,
        {"PATH": "/usr/bin", "HOME": str(root)},
        ["/bin/sh", "-c", "ls"],
        host=tmp_path / "empty",
    )
    assert argv == [
        "/usr/bin/bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", str(root), str(root),
        "--remount-ro", "/", "--chdir", str(root), "--clearenv",
        "--setenv", "PATH", "/usr/bin", "--setenv", "HOME", str(root),
        "--", "/bin/sh", "-c", "ls",
    ]  # fmt: skip


@needs_bwrap
async def test_commands_run_sandboxed_in_the_workspace_and_can_write_there(
    sandboxed: WorkspaceSettings,
) -> None:
    root = sandboxed.workspace
    async with connected(sandboxed) as client:
        info = await call(client, "workspace_info")
        result = await call(client, "shell", command="pwd; echo made > made.txt; mkdir -p d && echo ok > d/f")
    assert (info["sandbox"], info["sandbox_mode"], info["warning"]) == ("bwrap", "bwrap", None)
    assert (result["exit_code"], result["stdout"], result["sandbox"], result["warning"]) == (
        0,
        f"{root}\n",
        "bwrap",
        None,
    )
    assert ((root / "made.txt").read_text(), (root / "d" / "f").read_text()) == ("made\n", "ok\n")


@needs_bwrap
async def test_the_system_is_read_only_and_writes_outside_the_workspace_reach_nothing(
    sandboxed: WorkspaceSettings,
) -> None:
    root = sandboxed.workspace
    async with connected(sandboxed) as client:
        etc = await call(client, "shell", command="echo x > /etc/nexo-test")
        tmp_etc = await call(client, "shell", command="touch /tmp/../etc/x")
        usr = await call(client, "shell", command="touch /usr/nexo-test")
        climb = await call(client, "shell", command="cd .. && touch escape; touch ../escape2; echo done")
    assert "Read-only file system" in etc["stderr"]
    assert [etc["exit_code"] != 0, tmp_etc["exit_code"] != 0, usr["exit_code"] != 0] == [True, True, True]
    assert climb["stdout"] == "done\n"
    assert [exists(Path(p)) for p in ("/etc/nexo-test", "/etc/x", "/usr/nexo-test")] == [False, False, False]
    assert names(root.parent) == ["workspace"]


@needs_bwrap
async def test_nothing_of_the_host_outside_the_workspace_is_visible(
    sandboxed: WorkspaceSettings, outside: Path
) -> None:
    command = (
        f"cat {outside / 'secret.txt'}; "
        'for d in /home /root /work /var /srv /opt; do test -e $d && echo "$d is visible"; done; '
        "ls /etc"
    )
    async with connected(sandboxed) as client:
        result = await call(client, "shell", command=command)
    assert "outside secret" not in result["stdout"]
    assert "No such file or directory" in result["stderr"]
    assert " is visible" not in result["stdout"]
    listed = set(result["stdout"].split())
    assert listed <= {
        "alternatives",
        "ld.so.cache",
        "ld.so.conf",
        "ld.so.conf.d",
        "passwd",
        "group",
        "nsswitch.conf",
        "localtime",
    }
    assert "passwd" in listed


@needs_bwrap
async def test_the_network_is_unreachable(sandboxed: WorkspaceSettings) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        command = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)\""
        async with connected(sandboxed) as client:
            result = await call(client, "shell", command=command)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert result["exit_code"] != 0
    assert "Error" in result["stderr"]


@needs_bwrap
async def test_the_sandbox_environment_carries_nothing_from_the_server(
    sandboxed: WorkspaceSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEXO_CANARY_SECRET", "do-not-leak")
    async with connected(sandboxed) as client:
        result = await call(client, "shell", command="env")
    variables = dict(line.split("=", 1) for line in result["stdout"].splitlines())
    assert "do-not-leak" not in result["stdout"]
    assert set(variables) - {"PATH", "HOME", "LANG"} <= {"PWD", "OLDPWD", "SHLVL", "_"}
    assert variables["HOME"] == str(sandboxed.workspace)


@needs_bwrap
async def test_a_timeout_ends_every_process_of_the_sandbox(sandboxed: WorkspaceSettings) -> None:
    marker = "97.25"
    command = f"sh -c 'trap \"\" TERM; exec sleep {marker}' & trap '' TERM; wait"
    async with connected(sandboxed) as client:
        with anyio.fail_after(15):
            result = await call(client, "shell", command=command, timeout_s=0.5)
            for pid in sleepers(marker):
                await wait_gone(pid)
    assert (result["timed_out"], result["exit_code"], result["sandbox"]) == (True, None, "bwrap")
    assert result["duration_ms"] < 9_000


@needs_bwrap
async def test_a_detached_process_never_outlives_its_sandboxed_command(sandboxed: WorkspaceSettings) -> None:
    """bwrap's PID namespace ends everything the command started, ``setsid -f`` included."""
    marker = "96.375"
    with anyio.fail_after(30), killed_afterwards(marker):
        async with connected(sandboxed) as client:
            result = await call(client, "shell", command=f"setsid -f sleep {marker}; echo detached")
            left = await survivors(marker)
    assert (result["stdout"], result["sandbox"]) == ("detached\n", "bwrap")
    assert left == []
