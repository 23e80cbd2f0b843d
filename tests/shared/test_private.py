"""Private files and directories: 0700 for every directory created, 0600 files, first writer wins."""

from __future__ import annotations

import stat
from pathlib import Path

from shared.private import create_private_file, make_private_dirs


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_missing_parent_is_created_private(tmp_path: Path) -> None:
    make_private_dirs(tmp_path / "a" / "b" / "c")
    assert [_mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3


def test_a_private_file_is_written_once_and_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "state" / "key"
    create_private_file(path, b"first")
    create_private_file(path, b"second")
    assert path.read_bytes() == b"first"
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == ["key"]
