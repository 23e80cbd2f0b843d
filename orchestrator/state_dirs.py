"""Before any server starts: every state directory exists and this user can enter, read and write it.

A server that cannot open its database only learns "Permission denied"; this check names the
directory, its mode and owner, and the fix. A directory of this user's that lacks owner access (an
earlier run under a strict umask left ``drw-------``) is repaired to 0700 and reported as such.
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

from orchestrator.sockets import CONTROL_SOCKET
from shared.private import make_private_dirs

PRIVATE_DIR_MODE = 0o700
OWNER_ACCESS = stat.S_IRWXU
MAX_SOCKET_PATH = 107
"""Bytes a Unix socket path may have on Linux (``sun_path`` holds 108, the last one a NUL)."""


class StateDirError(Exception):
    """A state directory this user cannot use and may not repair."""


@dataclass(frozen=True)
class Repair:
    path: Path
    old_mode: int

    def __str__(self) -> str:
        return (
            f"repaired state directory {self.path}: an earlier run left it at mode "
            f"{describe_mode(self.old_mode)}, which this user cannot enter or write; "
            f"it is now {describe_mode(PRIVATE_DIR_MODE)}"
        )


def describe_mode(mode: int) -> str:
    """``0600 (drw-------)``: the octal permissions and what ``ls -l`` shows."""
    return f"{stat.S_IMODE(mode):04o} ({stat.filemode(stat.S_IFDIR | stat.S_IMODE(mode))})"


def _user_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def prepare_state_dirs(
    state_dir: Path, *, workspace: Path | None = None, sockets: tuple[str, ...] = (CONTROL_SOCKET,)
) -> list[Repair]:
    """Create ``state_dir`` (0700) if missing, then check it and every directory below it.

    The workspace root is checked but not entered: what the agent keeps there is its own.
    Raises ``StateDirError`` for a directory this user neither owns nor can use, or one so deeply
    nested that the sockets nexo keeps in it would not fit a Unix socket path.
    """
    _check_socket_room(state_dir, sockets)
    try:
        make_private_dirs(state_dir)
    except OSError as exc:
        raise StateDirError(
            f"cannot create state directory {state_dir}: {exc.strerror} ({exc.filename}). "
            f"Fix: set state_dir (NEXO_STATE_DIR) to a directory this user ({_user_name(os.geteuid())}) "
            "can write"
        ) from exc
    repairs: list[Repair] = []
    if workspace is not None and workspace.is_dir() and not _below(workspace, state_dir):
        _check(workspace, repairs)
    _check(state_dir, repairs)
    for directory, subdirectories, _files in os.walk(state_dir, onerror=_raise):
        here = Path(directory)
        entered = []
        for name in subdirectories:
            path = here / name
            if path.is_symlink():
                continue
            _check(path, repairs)
            if workspace is None or path.absolute() != workspace.absolute():
                entered.append(name)
        subdirectories[:] = entered
    return repairs


def _below(path: Path, parent: Path) -> bool:
    return path.absolute().is_relative_to(parent.absolute())


def _raise(error: OSError) -> None:
    raise StateDirError(
        f"cannot read state directory {error.filename}: {error.strerror}. "
        f"Fix: give this user ({_user_name(os.geteuid())}) access to it, or set state_dir "
        "(NEXO_STATE_DIR) to a directory this user owns"
    ) from error


def _check(directory: Path, repairs: list[Repair]) -> None:
    """Mutates the directory's mode when it is this user's and lacks owner access: os.walk descends
    into it right after, so it must be usable by then."""
    info = directory.stat()
    me = os.geteuid()
    if info.st_uid == me:
        if info.st_mode & OWNER_ACCESS == OWNER_ACCESS:
            return
        try:
            directory.chmod(PRIVATE_DIR_MODE)
        except OSError as exc:
            raise StateDirError(
                f"state directory {directory} has mode {describe_mode(info.st_mode)} and cannot be "
                f"repaired ({exc.strerror}). Fix: `chmod 700 {directory}`"
            ) from exc
        repairs.append(Repair(directory, stat.S_IMODE(info.st_mode)))
        return
    if os.access(directory, os.R_OK | os.W_OK | os.X_OK):
        return
    raise StateDirError(
        f"state directory {directory} belongs to {_user_name(info.st_uid)} with mode "
        f"{describe_mode(info.st_mode)}: this user ({_user_name(me)}) cannot enter or write it. "
        f"Fix: `chown -R {me} {directory}` as its owner or root, or set state_dir (NEXO_STATE_DIR) "
        "to a directory this user owns"
    )


def _check_socket_room(state_dir: Path, sockets: tuple[str, ...]) -> None:
    longest = max((state_dir.absolute() / name for name in sockets), key=lambda p: len(os.fsencode(p)))
    size = len(os.fsencode(longest))
    if size > MAX_SOCKET_PATH:
        raise StateDirError(
            f"state directory {state_dir} is too deep for nexo's sockets: {longest} would be {size} bytes, "
            f"and a Unix socket path holds at most {MAX_SOCKET_PATH}. Fix: set state_dir (NEXO_STATE_DIR) "
            f"to a path at least {size - MAX_SOCKET_PATH} bytes shorter"
        )
