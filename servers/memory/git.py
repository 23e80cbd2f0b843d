"""Run git for the memory server: no shell, a fixed identity, none of the user's configuration.

The repositories are the agent's audit trail, so every commit must look the same whoever runs the
server: the author and committer are always ``nexo <nexo@localhost>``, global and system config are
ignored (no signing, hooks path, editor or credential helper can intervene), inherited ``GIT_*``
variables (a ``GIT_DIR`` from an enclosing hook, say) are dropped, and git can never prompt.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import anyio

GIT = "git"
IDENTITY = {"name": "nexo", "email": "nexo@localhost"}
TIMEOUT_S = 30.0


class GitError(Exception):
    """git failed or could not be run; the message names the command, the repository and git's words."""


def git_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_AUTHOR_NAME=IDENTITY["name"],
        GIT_AUTHOR_EMAIL=IDENTITY["email"],
        GIT_COMMITTER_NAME=IDENTITY["name"],
        GIT_COMMITTER_EMAIL=IDENTITY["email"],
        LC_ALL="C",
    )
    return env


async def run_git(
    repo: Path, *args: str, check: bool = True, executable: str = GIT, timeout: float = TIMEOUT_S
) -> subprocess.CompletedProcess[bytes]:
    """``git -C repo args...``; raises ``GitError`` when it cannot run, times out, or (with check) fails."""
    command = [executable, "-C", str(repo), *args]
    # Only the subcommand: the other arguments may carry commit messages, which are the agent's text.
    shown = " ".join(["git", *args[:1]])
    try:
        with anyio.fail_after(timeout):
            # stdin is /dev/null: under stdio hosting the inherited stdin is the JSON-RPC stream.
            result = await anyio.run_process(command, check=False, stdin=subprocess.DEVNULL, env=git_env())
    except FileNotFoundError as exc:
        raise GitError(f"cannot run {executable!r}: it is not installed or not on PATH; install git") from exc
    except TimeoutError as exc:
        raise GitError(f"{shown} in {repo} did not finish within {timeout:g}s") from exc
    if check and result.returncode != 0:
        said = (result.stderr or result.stdout).decode(errors="replace").strip() or "(no output)"
        raise GitError(f"{shown} failed in {repo} with exit status {result.returncode}: {said}")
    return result
