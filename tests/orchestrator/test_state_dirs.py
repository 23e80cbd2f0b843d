"""Start-up check of the state directories: usable ones pass, this user's broken ones are repaired,
someone else's unusable ones stop ``nexo run`` with the path, the mode and the fix."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from orchestrator.sockets import CONSOLE_SOCKET, CONTROL_SOCKET
from orchestrator.state_dirs import Repair, StateDirError, prepare_state_dirs
from shared.private import make_private_dirs
from tests.orchestrator.another_user import NOBODY, answer_as_nobody, reachable_tmp


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_missing_state_directory_is_created_private_and_needs_no_repair(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert prepare_state_dirs(state) == []
    assert _mode(state) == 0o700


def test_directories_an_earlier_run_left_at_0600_are_repaired_nested_ones_too(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "memory" / "agents").mkdir(parents=True)
    (state / "audit").mkdir()
    for path in (state / "memory" / "agents", state / "memory", state / "audit"):
        path.chmod(0o600)
    repairs = prepare_state_dirs(state)
    assert sorted(repairs, key=lambda r: str(r.path)) == [
        Repair(state / "audit", 0o600),
        Repair(state / "memory", 0o600),
        Repair(state / "memory" / "agents", 0o600),
    ]
    assert [_mode(state / p) for p in ("audit", "memory", "memory/agents")] == [0o700] * 3
    assert str(repairs[0]) == (
        f"repaired state directory {state / 'audit'}: an earlier run left it at mode 0600 (drw-------), "
        "which this user cannot enter or write; it is now 0700 (drwx------)"
    )


def test_the_workspace_root_is_checked_but_what_the_agent_keeps_in_it_is_not_touched(tmp_path: Path) -> None:
    state = tmp_path / "state"
    workspace = state / "workspace"
    (workspace / "project").mkdir(parents=True)
    (workspace / "project").chmod(0o500)
    workspace.chmod(0o600)
    assert prepare_state_dirs(state, workspace=workspace) == [Repair(workspace, 0o600)]
    assert (_mode(workspace), _mode(workspace / "project")) == (0o700, 0o500)


def test_a_workspace_outside_the_state_directory_is_checked_too(tmp_path: Path) -> None:
    workspace = tmp_path / "elsewhere"
    workspace.mkdir(mode=0o700)
    workspace.chmod(0o600)
    assert prepare_state_dirs(tmp_path / "state", workspace=workspace) == [Repair(workspace, 0o600)]


def test_private_directories_are_0700_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o177)  # noqa: TID251 -- the strict umask under test, restored at once
    try:
        make_private_dirs(tmp_path / "a" / "b")
    finally:
        os.umask(previous)  # noqa: TID251
    assert [_mode(tmp_path / "a"), _mode(tmp_path / "a" / "b")] == [0o700, 0o700]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to another user")
def test_a_directory_of_another_user_that_this_user_cannot_use_is_an_error_naming_path_mode_and_fix() -> None:
    def check(state: Path) -> str:
        try:
            prepare_state_dirs(state)
        except StateDirError as exc:
            return str(exc)
        return "no error"

    with reachable_tmp() as tmp:
        state = tmp / "state"
        state.mkdir(mode=0o700)
        (state / "cron").mkdir(mode=0o700)
        os.chown(state, NOBODY, NOBODY)
        (state / "cron").chmod(0o600)
        message = answer_as_nobody(lambda: check(state))
    assert message == (
        f"state directory {state / 'cron'} belongs to root (uid 0) with mode 0600 (drw-------): "
        f"this user (nobody (uid {NOBODY})) cannot enter or write it. Fix: `chown -R {NOBODY} "
        f"{state / 'cron'}` as its owner or root, or set state_dir (NEXO_STATE_DIR) to a directory "
        "this user owns"
    )


def test_a_state_directory_too_deep_for_a_unix_socket_is_refused_with_how_much_shorter(
    tmp_path: Path,
) -> None:
    room = 107 - len(os.fsencode(tmp_path.absolute() / "console" / "console.sock"))
    fits, too_deep = tmp_path / ("s" * (room - 1)), tmp_path / ("s" * (room + 2))
    sockets = (CONTROL_SOCKET, CONSOLE_SOCKET)
    assert prepare_state_dirs(fits, sockets=sockets) == []
    assert prepare_state_dirs(too_deep) == []  # without the console, the control socket still fits
    with pytest.raises(StateDirError) as refused:
        prepare_state_dirs(too_deep / "x", sockets=sockets)
    assert str(refused.value) == (
        f"state directory {too_deep / 'x'} is too deep for nexo's sockets: {too_deep}/x/console/console.sock "
        "would be 112 bytes, and a Unix socket path holds at most 107. Fix: set state_dir "
        "(NEXO_STATE_DIR) to a path at least 5 bytes shorter"
    )
    assert not (too_deep / "x").exists()
