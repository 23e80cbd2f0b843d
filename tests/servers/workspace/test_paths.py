"""Confinement: resolution, refusals, race-free opening and atomic writes, without MCP in between."""

from __future__ import annotations

import os
import shutil
import stat
from contextlib import closing
from pathlib import Path

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from servers.workspace.paths import Confinement, Located, PathRefused, glob_regex, prepare_root


@pytest.fixture
def files(root: Path) -> Confinement:
    return Confinement(root)


def read(files: Confinement, path: str) -> bytes:
    fd = files.open_file(files.locate(path))
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def test_relative_and_absolute_paths_inside_the_root_resolve_to_their_components(
    files: Confinement, root: Path
) -> None:
    (root / "docs").mkdir()
    relative = files.locate("docs/../docs/./notes.md")
    absolute = files.locate(str(root / "docs" / "notes.md"))
    top = files.locate(".")
    assert (relative.parts, relative.rel, relative.real) == (
        ("docs", "notes.md"),
        "docs/notes.md",
        root / "docs/notes.md",
    )
    assert absolute == Located(str(root / "docs" / "notes.md"), root / "docs/notes.md", ("docs", "notes.md"))
    assert (top.parts, top.rel) == ((), ".")


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../outside/secret.txt", "'..' may not climb out of it"),
        ("docs/../../outside/secret.txt", "'..' may not climb out of it"),
        ("..", "'..' may not climb out of it"),
    ],
)
def test_dot_dot_cannot_climb_out_of_the_root(files: Confinement, root: Path, path: str, why: str) -> None:
    with pytest.raises(PathRefused) as refusal:
        files.locate(path)
    assert str(refusal.value) == (
        f"{path!r} is outside the workspace ({why}); paths must stay inside {root}, "
        "and relative paths start there"
    )


def test_an_absolute_path_outside_the_root_is_refused(files: Confinement, root: Path, outside: Path) -> None:
    with pytest.raises(PathRefused, match=r"absolute paths must point inside it") as refusal:
        files.locate(str(outside / "secret.txt"))
    assert str(root) in str(refusal.value)
    with pytest.raises(PathRefused, match=r"absolute paths must point inside it"):
        files.locate("/etc/passwd")


def test_a_prefix_sibling_of_the_root_is_outside_it(files: Confinement, root: Path) -> None:
    sibling = root.parent / (root.name + "-other")
    sibling.mkdir()
    with pytest.raises(PathRefused):
        files.locate(str(sibling / "x"))


def test_a_nul_byte_is_refused(files: Confinement) -> None:
    with pytest.raises(PathRefused, match=r"contains a NUL byte"):
        files.locate("notes\x00.md")


def test_a_symlinked_file_pointing_outside_is_refused(files: Confinement, root: Path, outside: Path) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(PathRefused, match=r"a symlink on the way points out of it"):
        files.locate("link.txt")


def test_a_symlinked_parent_directory_pointing_outside_is_refused_for_reads_and_new_files(
    files: Confinement, root: Path, outside: Path
) -> None:
    (root / "sub").symlink_to(outside, target_is_directory=True)
    for path in ("sub/secret.txt", "sub/new.txt", "sub/deeper/new.txt"):
        with pytest.raises(PathRefused, match=r"a symlink on the way points out of it"):
            files.locate(path)


def test_a_dangling_symlink_pointing_outside_is_refused(
    files: Confinement, root: Path, outside: Path
) -> None:
    (root / "dangling").symlink_to(outside / "not-yet")
    with pytest.raises(PathRefused):
        files.locate("dangling")
    assert not (outside / "not-yet").exists()


def test_symlinks_that_stay_inside_resolve_to_their_target(files: Confinement, root: Path) -> None:
    (root / "real").mkdir()
    (root / "real" / "a.txt").write_text("inside\n")
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    located = files.locate("alias/a.txt")
    assert located.parts == ("real", "a.txt")
    assert read(files, "alias/a.txt") == b"inside\n"


def test_a_parent_swapped_for_a_symlink_after_resolution_is_not_followed(
    files: Confinement, root: Path, outside: Path
) -> None:
    (root / "sub").mkdir()
    (root / "sub" / "secret.txt").write_text("inside\n")
    reading = files.locate("sub/secret.txt")
    writing = files.locate("sub/secret.txt")
    shutil.rmtree(root / "sub")
    (root / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PathRefused, match=r"'sub' is a symlink .* and is not followed"):
        files.open_file(reading)
    with pytest.raises(PathRefused, match=r"'sub' is a symlink"):
        files.write_atomic(writing, b"overwritten\n")
    assert (outside / "secret.txt").read_text() == "outside secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_a_file_swapped_for_a_symlink_after_resolution_is_not_followed(
    files: Confinement, root: Path, outside: Path
) -> None:
    (root / "notes.txt").write_text("inside\n")
    located = files.locate("notes.txt")
    (root / "notes.txt").unlink()
    (root / "notes.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(PathRefused, match=r"turned into a symlink after it was resolved"):
        files.open_file(located)
    with pytest.raises(PathRefused, match=r"'notes.txt' is a symlink"):
        files.write_atomic(located, b"overwritten\n")
    assert (outside / "secret.txt").read_text() == "outside secret\n"


def test_a_descriptor_opened_outside_the_root_fails_the_proc_check(files: Confinement, outside: Path) -> None:
    fd = os.open(outside / "secret.txt", os.O_RDONLY)
    try:
        with pytest.raises(PathRefused, match=r"was opened as .*secret.txt, outside the workspace"):
            files.check_descriptor(fd, "secret.txt")
    finally:
        os.close(fd)


def test_fifos_and_directories_are_not_read(files: Confinement, root: Path) -> None:
    os.mkfifo(root / "pipe")
    (root / "dir").mkdir()
    with pytest.raises(
        PathRefused, match=r"'pipe' is a device, FIFO or socket; only regular files can be read"
    ):
        files.open_file(files.locate("pipe"))
    with pytest.raises(ToolError, match=r"'dir' is a directory; list_dir or glob show what is inside"):
        files.open_file(files.locate("dir"))
    with pytest.raises(PathRefused, match=r"only regular files can be written"):
        files.write_atomic(files.locate("pipe"), b"x")


def test_a_missing_file_and_a_file_used_as_a_directory_are_explained(files: Confinement, root: Path) -> None:
    (root / "plain.txt").write_text("x")
    with pytest.raises(ToolError, match=r"'nope.txt' does not exist in the workspace \(nope.txt\)"):
        files.open_file(files.locate("nope.txt"))
    with pytest.raises(ToolError, match=r"'plain.txt/x': 'plain.txt' is a file, not a directory"):
        files.open_file(files.locate("plain.txt/x"))


def test_atomic_writes_create_parents_keep_modes_and_leave_no_temporary_files(
    files: Confinement, root: Path
) -> None:
    assert files.write_atomic(files.locate("a/b/new.txt"), b"one\n") is True
    (root / "tool.sh").write_text("old")
    (root / "tool.sh").chmod(0o750)
    assert files.write_atomic(files.locate("tool.sh"), b"#!/bin/sh\n") is False
    assert (root / "a/b/new.txt").read_bytes() == b"one\n"
    assert stat.S_IMODE((root / "a/b/new.txt").stat().st_mode) == 0o644
    assert ((root / "tool.sh").read_text(), stat.S_IMODE((root / "tool.sh").stat().st_mode)) == (
        "#!/bin/sh\n",
        0o750,
    )
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == ["a", "a/b", "a/b/new.txt", "tool.sh"]


def test_writes_through_a_symlink_inside_the_root_update_its_target(files: Confinement, root: Path) -> None:
    (root / "target.txt").write_text("old")
    (root / "alias.txt").symlink_to("target.txt")
    files.write_atomic(files.locate("alias.txt"), b"new")
    assert ((root / "alias.txt").is_symlink(), (root / "target.txt").read_text()) == (True, "new")


def test_the_walk_lists_symlinks_but_never_enters_them(files: Confinement, root: Path, outside: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("a")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    with closing(files.walk(files.locate("."), descend=lambda rel, depth: True)) as walk:
        seen = [(entry.rel, entry.kind, entry.depth) for entry in walk]
    assert seen == [("escape", "symlink", 1), ("src", "dir", 1), ("src/a.py", "file", 2)]


def test_prepare_root_creates_a_private_directory_and_refuses_unusable_roots(tmp_path: Path) -> None:
    made = prepare_root(tmp_path / "state" / "workspace")
    (tmp_path / "file").write_text("x")
    assert (made, stat.S_IMODE(made.stat().st_mode)) == (tmp_path / "state" / "workspace", 0o700)
    with pytest.raises(ValueError, match=r"is the file-system root; set NEXO_WORKSPACE_ROOT"):
        prepare_root(Path("/"))
    with pytest.raises(ValueError, match=r"exists and is not a directory"):
        prepare_root(tmp_path / "file")


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("*.py", ["a.py", ".hidden.py"], ["src/a.py", "a.pyc"]),
        ("**/*.py", ["a.py", "src/a.py", "src/deep/er/a.py"], ["a.txt", "src/a.pyc"]),
        ("src/**", ["src/a", "src/x/y"], ["src", "lib/a"]),
        ("src/**/test_*.py", ["src/test_a.py", "src/x/test_b.py"], ["test_a.py", "src/x/a_test.py"]),
        ("?.md", ["a.md"], ["ab.md", "/.md"]),
        ("[!a]*.txt", ["b.txt"], ["a.txt", "/x.txt"]),
        ("[ab].txt", ["a.txt", "b.txt"], ["c.txt"]),
        ("file[1.txt", ["file[1.txt"], ["file1.txt"]),
    ],
)
def test_glob_patterns(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    regex = glob_regex(pattern)
    assert [path for path in matching if regex.match(path)] == matching
    assert [path for path in not_matching if regex.match(path)] == []
