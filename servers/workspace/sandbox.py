"""Confining shell commands with bubblewrap: what the sandbox sees, and whether it works here."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcp.server.mcpserver.exceptions import ToolError

from servers.workspace.settings import SandboxMode
from servers.workspace.shell import run_command

Active = Literal["bwrap", "none"]

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Read-only inside the sandbox (mirrored as symlinks where the host has symlinks)."""
SYSTEM_FILES = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
)
"""The only parts of /etc a command sees, read-only, when the host has them."""
PROBE_TIMEOUT_S = 10.0
INSTALL_HINT = "install bubblewrap (`sudo apt-get install bubblewrap`) and restart nexo"
UNCONFINED_WARNING = (
    "commands run unconfined, with this user's full access (NEXO_WORKSPACE_SANDBOX=none); "
    "remove that setting to run them under bubblewrap"
)


def system_mounts(host: Path = Path("/")) -> list[str]:
    """bwrap arguments exposing the host's system directories and files read-only."""
    args: list[str] = []
    for target in SYSTEM_DIRS:
        source = host / target.lstrip("/")
        if source.is_symlink():
            args += ["--symlink", str(source.readlink()), target]
        elif source.is_dir():
            args += ["--ro-bind", str(source), target]
    for target in SYSTEM_FILES:
        source = host / target.lstrip("/")
        if source.exists():
            args += ["--ro-bind", str(source), target]
    return args


def bwrap_argv(
    program: str,
    root: Path,
    env: Mapping[str, str],
    command: Sequence[str],
    *,
    host: Path = Path("/"),
) -> list[str]:
    """The full bwrap command line running ``command`` with ``root`` as the only writable directory
    (besides a private /tmp), no network, no capabilities and only ``env`` as environment."""
    workspace = str(root)
    argv = [program, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    argv += system_mounts(host)
    # S108: a private tmpfs mounted at the sandbox's /tmp, not a host temporary file.
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", workspace, workspace]  # noqa: S108
    # Everything mounted so far sits on bwrap's own root tmpfs; making it read-only stops writes
    # to /etc, / and the like inside the sandbox, while the workspace and /tmp stay writable.
    argv += ["--remount-ro", "/", "--chdir", workspace, "--clearenv"]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return [*argv, "--", *command]


@dataclass(frozen=True, slots=True)
class Sandbox:
    """The sandbox state decided once at start: what commands run in and why."""

    mode: SandboxMode
    active: Active
    reason: str
    program: str | None = None
    """The bwrap executable, when active."""

    @property
    def warning(self) -> str | None:
        return UNCONFINED_WARNING if self.mode == "none" else None

    @property
    def shell_offered(self) -> bool:
        """Commands run only in a working sandbox, or unconfined when the operator chose ``none``."""
        return self.active == "bwrap" or self.mode == "none"

    def unavailable(self) -> str | None:
        """Why the shell is not offered (no working sandbox), with the fix; None when it is."""
        if self.shell_offered:
            return None
        return (
            f"the shell tool is not offered: bubblewrap cannot sandbox commands ({self.reason}); "
            f"{INSTALL_HINT}, or set NEXO_WORKSPACE_SANDBOX=none to run commands unconfined"
        )

    def wrap(self, command: Sequence[str], root: Path, env: Mapping[str, str]) -> list[str]:
        if self.program is None:
            return list(command)
        return bwrap_argv(self.program, root, env, command)


async def probe(mode: SandboxMode, program: str, root: Path, env: Mapping[str, str]) -> Sandbox:
    """Decide the sandbox: under ``auto`` and ``bwrap``, run ``sh -c true`` inside the real mounts."""
    if mode == "none":
        return Sandbox(mode, "none", "disabled by NEXO_WORKSPACE_SANDBOX=none")
    found = shutil.which(program)
    if found is None:
        return Sandbox(mode, "none", f"{program!r} is not an executable on PATH")
    try:
        outcome = await run_command(
            bwrap_argv(found, root, env, ["/bin/sh", "-c", "true"]),
            cwd=root,
            env=env,
            timeout_s=PROBE_TIMEOUT_S,
            max_output_bytes=4096,
        )
    except ToolError as exc:
        return Sandbox(mode, "none", f"{found} could not be started ({exc})")
    if outcome.exit_code == 0:
        return Sandbox(mode, "bwrap", f"{found} passed its start-up check", found)
    if outcome.timed_out:
        detail = f"it did not finish within {PROBE_TIMEOUT_S:g} s"
    else:
        lines = outcome.stderr.strip().splitlines()
        detail = f"exit status {outcome.exit_code}" + (f": {lines[0]}" if lines else "")
    return Sandbox(mode, "none", f"{found} failed its start-up check ({detail})")
