"""The suite's temporary directories go to a roomy tmpfs (see tests/temp_root.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.temp_root import MIN_FREE_BYTES, TEMPROOT_VARIABLE, TMPFS, _mounts, memory_temp_root

_DISK = "/dev/vda / ext4 rw,relatime 0 0\n"
_SHM = "tmpfs /dev/shm tmpfs rw,nosuid,nodev,size=24683656k 0 0\n"


def test_a_tmpfs_with_room_holds_the_temporary_files() -> None:
    assert memory_temp_root(_DISK + _SHM, lambda path: MIN_FREE_BYTES) == TMPFS


def test_a_small_tmpfs_leaves_them_in_the_system_temporary_directory() -> None:
    # Docker gives a container a 64 MB /dev/shm unless told otherwise.
    assert memory_temp_root(_DISK + _SHM, lambda path: 64 << 20) is None


def test_a_dev_shm_that_is_not_a_tmpfs_or_no_mounts_table_leaves_them_there_too() -> None:
    assert memory_temp_root(_DISK + "/dev/vdb /dev/shm ext4 rw 0 0\n", lambda path: 1 << 40) is None
    assert memory_temp_root("", lambda path: 1 << 40) is None
    assert memory_temp_root("tmpfs /dev/shm/sub tmpfs rw 0 0\n", lambda path: 1 << 40) is None


def test_this_run_keeps_its_files_where_it_was_told_or_on_the_tmpfs(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    chosen = os.environ.get(TEMPROOT_VARIABLE)
    if chosen is None:
        assert memory_temp_root(_mounts()) is None or pytestconfig.option.basetemp is not None
    else:
        assert tmp_path.resolve().is_relative_to(Path(chosen).resolve())
