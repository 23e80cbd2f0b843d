"""The file tools and workspace_info, through the MCP protocol in memory."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import StdioServerParameters
from mcp.client import Client

from servers.workspace.sandbox import UNCONFINED_WARNING
from servers.workspace.server import EDIT, OVERWRITE, SHELL
from servers.workspace.settings import WorkspaceSettings
from shared.protocol.policy import (
    CLASSIFICATION_META_KEY,
    PATH_ARGS_META_KEY,
    PRIVATE_DATA_META_KEY,
    SHELL_META_KEY,
)
from shared.protocol.policy import READ_ONLY_HINTS as READ_ONLY
from tests.mesh.harness import REPO
from tests.servers.workspace.conftest import (
    call,
    connected,
    exists,
    killed_afterwards,
    names,
    refused,
    survivors,
)

pytestmark = pytest.mark.anyio


async def test_every_tool_carries_its_classification_and_annotations(settings: WorkspaceSettings) -> None:
    async with connected(settings) as client:
        tools = (await client.list_tools()).tools
    described: dict[str, tuple[types.ToolAnnotations | None, dict[str, object] | None]] = {
        tool.name: (tool.annotations, tool.meta) for tool in tools
    }
    reads = {CLASSIFICATION_META_KEY: "read_only", PATH_ARGS_META_KEY: ["path"], PRIVATE_DATA_META_KEY: True}
    writes = {CLASSIFICATION_META_KEY: "write", PATH_ARGS_META_KEY: ["path"]}
    assert described == {
        "read_file": (READ_ONLY, reads),
        "write_file": (OVERWRITE, writes),
        "edit_file": (EDIT, writes),
        "list_dir": (READ_ONLY, reads),
        "glob": (READ_ONLY, {CLASSIFICATION_META_KEY: "read_only", PRIVATE_DATA_META_KEY: True}),
        "grep": (READ_ONLY, reads),
        "shell": (
            SHELL,
            {CLASSIFICATION_META_KEY: "dangerous", SHELL_META_KEY: True, PRIVATE_DATA_META_KEY: True},
        ),
        "workspace_info": (READ_ONLY, {CLASSIFICATION_META_KEY: "read_only"}),
    }
    assert (READ_ONLY.read_only_hint, READ_ONLY.destructive_hint) == (True, False)
    assert (OVERWRITE.read_only_hint, OVERWRITE.destructive_hint) == (False, True)
    assert (SHELL.destructive_hint, SHELL.open_world_hint) == (True, True)


async def test_the_root_is_created_private_at_start_and_reported_by_workspace_info(
    settings: WorkspaceSettings,
) -> None:
    async with connected(settings) as client:
        info = await call(client, "workspace_info")
    root = settings.workspace
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert info == {
        "root": str(root),
        "sandbox": "none",
        "sandbox_mode": "none",
        "sandbox_reason": "disabled by NEXO_WORKSPACE_SANDBOX=none",
        "shell": True,
        "warning": UNCONFINED_WARNING,
        "limits": {
            "max_read_bytes": 262144,
            "max_write_bytes": 1048576,
            "max_output_bytes": 65536,
            "max_command_bytes": 16384,
            "shell_timeout_max_s": 600.0,
            "max_results": 1000,
            "max_matches": 500,
            "max_scan_entries": 200000,
        },
    }


async def test_write_then_read_round_trips_text_exactly(settings: WorkspaceSettings, root: Path) -> None:
    text = "first\n  indented\ttab\r\nünïcode ✓\nno newline at end"
    async with connected(settings) as client:
        written = await call(client, "write_file", path="notes/today.md", content=text)
        again = await call(client, "write_file", path=str(root / "notes/today.md"), content=text)
        read = await call(client, "read_file", path="notes/today.md")
    assert written == {"path": "notes/today.md", "bytes": len(text.encode()), "created": True}
    assert again["created"] is False
    assert read == {
        "path": "notes/today.md",
        "content": text,
        "first_line": 1,
        "last_line": 4,
        "total_lines": 4,
        "truncated": False,
        "next_offset": None,
    }
    assert (root / "notes/today.md").read_bytes() == text.encode()


async def test_read_file_pages_by_lines_and_by_bytes(tmp_path: Path, root: Path) -> None:
    settings = WorkspaceSettings(state_dir=tmp_path / "state", sandbox="none", max_read_bytes=20)
    (root / "ten.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    (root / "long.txt").write_text("x" * 50 + "\nshort\n")
    (root / "empty.txt").write_text("")
    async with connected(settings) as client:
        window = await call(client, "read_file", path="ten.txt", offset=3, limit=2)
        capped = await call(client, "read_file", path="ten.txt", offset=9)
        by_bytes = await call(client, "read_file", path="ten.txt")
        long_line = await call(client, "read_file", path="long.txt")
        empty = await call(client, "read_file", path="empty.txt")
    assert window == {
        "path": "ten.txt",
        "content": "line 3\nline 4\n",
        "first_line": 3,
        "last_line": 4,
        "total_lines": 10,
        "truncated": True,
        "next_offset": 5,
    }
    assert (capped["content"], capped["truncated"], capped["next_offset"]) == (
        "line 9\nline 10\n",
        False,
        None,
    )
    assert (by_bytes["content"], by_bytes["last_line"], by_bytes["next_offset"]) == ("line 1\nline 2\n", 2, 3)
    assert (long_line["content"], long_line["truncated"], long_line["next_offset"]) == ("x" * 20, True, 2)
    assert (long_line["total_lines"], empty["content"], empty["total_lines"]) == (2, "", 0)


async def test_read_file_explains_what_it_cannot_read(settings: WorkspaceSettings, root: Path) -> None:
    (root / "three.txt").write_text("a\nb\nc\n")
    (root / "blob.bin").write_bytes(b"\x7fELF\x00\x01")
    (root / "dir").mkdir()
    async with connected(settings) as client:
        past = await refused(client, "read_file", path="three.txt", offset=5)
        zero = await refused(client, "read_file", path="three.txt", offset=0)
        binary = await refused(client, "read_file", path="blob.bin")
        directory = await refused(client, "read_file", path="dir")
        missing = await refused(client, "read_file", path="nope.txt")
    assert past == "offset 5 is past the end of 'three.txt', which has 3 lines"
    assert zero == "offset is a 1-based line number; got 0. Use 1 for the start"
    assert (
        binary
        == "'blob.bin' is a binary file; read_file returns text only (try shell: `xxd blob.bin | head`)"
    )
    assert directory == "'dir' is a directory; list_dir or glob show what is inside"
    assert (
        missing
        == "'nope.txt' does not exist in the workspace (nope.txt); list_dir or glob show what is there"
    )


async def test_reads_and_writes_never_leave_the_root(
    settings: WorkspaceSettings, root: Path, outside: Path
) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    attempts = [
        ("read_file", {"path": "link.txt"}),
        ("read_file", {"path": "linkdir/secret.txt"}),
        ("read_file", {"path": "../outside/secret.txt"}),
        ("read_file", {"path": str(outside / "secret.txt")}),
        ("write_file", {"path": "link.txt", "content": "pwned"}),
        ("write_file", {"path": "linkdir/new.txt", "content": "pwned"}),
        ("write_file", {"path": "../outside/new.txt", "content": "pwned"}),
        ("write_file", {"path": str(outside / "secret.txt"), "content": "pwned"}),
        ("edit_file", {"path": "link.txt", "old_string": "outside", "new_string": "pwned"}),
        ("list_dir", {"path": "linkdir"}),
        ("grep", {"pattern": "secret", "path": "linkdir"}),
    ]
    async with connected(settings) as client:
        messages = [await refused(client, tool, **arguments) for tool, arguments in attempts]
    assert all("is outside the workspace" in message and str(root) in message for message in messages), (
        messages
    )
    assert names(outside) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "outside secret\n"


async def test_write_file_refuses_content_over_the_cap_and_directories(tmp_path: Path, root: Path) -> None:
    settings = WorkspaceSettings(state_dir=tmp_path / "state", sandbox="none", max_write_bytes=10)
    (root / "dir").mkdir()
    async with connected(settings) as client:
        too_big = await refused(client, "write_file", path="a.txt", content="x" * 11)
        on_dir = await refused(client, "write_file", path="dir", content="x")
        on_root = await refused(client, "write_file", path=".", content="x")
    assert too_big == (
        "content is 11 bytes; write_file writes at most 10 bytes (NEXO_WORKSPACE_MAX_WRITE_BYTES). "
        "Split it into several files"
    )
    assert on_dir == "'dir' is a directory; give the path of a file inside it"
    assert on_root == "'.' is the workspace directory itself; give a file path"
    assert not exists(root / "a.txt")


async def test_edit_file_replaces_one_exact_occurrence_or_all_when_asked(
    settings: WorkspaceSettings, root: Path
) -> None:
    (root / "app.py").write_text("x = 1\ny = 1\nprint(x)\n")
    (root / "app.py").chmod(0o755)
    async with connected(settings) as client:
        one = await call(client, "edit_file", path="app.py", old_string="x = 1", new_string="x = 2")
        ambiguous = await refused(client, "edit_file", path="app.py", old_string=" = ", new_string="=")
        every = await call(
            client, "edit_file", path="app.py", old_string=" = ", new_string="=", replace_all=True
        )
        absent = await refused(client, "edit_file", path="app.py", old_string="z = 1", new_string="z = 2")
    assert one == {"path": "app.py", "replacements": 1, "bytes": 21}
    assert ambiguous == (
        "old_string occurs 2 times in 'app.py'; include more surrounding text to make it unique, "
        "or pass replace_all=true to replace every occurrence"
    )
    assert every == {"path": "app.py", "replacements": 2, "bytes": 17}
    assert absent == (
        "old_string was not found in 'app.py' (0 matches); it must match the file exactly, including "
        "whitespace and indentation: read_file shows the current text"
    )
    assert (root / "app.py").read_text() == "x=2\ny=1\nprint(x)\n"
    assert stat.S_IMODE((root / "app.py").stat().st_mode) == 0o755


async def test_edit_file_refuses_pointless_and_unsafe_edits(tmp_path: Path, root: Path) -> None:
    settings = WorkspaceSettings(state_dir=tmp_path / "state", sandbox="none", max_write_bytes=12)
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    (root / "big.txt").write_text("y" * 13)
    (root / "small.txt").write_text("abc")
    async with connected(settings) as client:
        empty = await refused(client, "edit_file", path="small.txt", old_string="", new_string="x")
        same = await refused(client, "edit_file", path="small.txt", old_string="a", new_string="a")
        latin = await refused(client, "edit_file", path="latin1.txt", old_string="caf", new_string="CAF")
        big = await refused(client, "edit_file", path="big.txt", old_string="y", new_string="z")
        grows = await refused(client, "edit_file", path="small.txt", old_string="b", new_string="b" * 20)
    assert empty == "old_string is empty; give the exact text to replace, or use write_file"
    assert same == "old_string and new_string are the same, so nothing would change"
    assert latin == "'latin1.txt' is not UTF-8 text; edit_file edits UTF-8 text only"
    assert big == (
        "'big.txt' is larger than 12 bytes, the most edit_file rewrites (NEXO_WORKSPACE_MAX_WRITE_BYTES); "
        "edit it with a script through shell"
    )
    assert (
        grows == "the edited file would be 22 bytes, over the 12-byte limit (NEXO_WORKSPACE_MAX_WRITE_BYTES)"
    )
    assert (root / "small.txt").read_text() == "abc"


async def test_list_dir_shows_entries_sorted_with_kinds_and_sizes(
    tmp_path: Path, root: Path, outside: Path
) -> None:
    settings = WorkspaceSettings(state_dir=tmp_path / "state", sandbox="none", max_results=3)
    (root / "b.txt").write_text("12345")
    (root / "a").mkdir()
    (root / "a" / "inner.txt").write_text("x")
    (root / "c").symlink_to(outside, target_is_directory=True)
    (root / "d.txt").write_text("")
    async with connected(settings) as client:
        top = await call(client, "list_dir")
        inner = await call(client, "list_dir", path="a")
        on_file = await refused(client, "list_dir", path="b.txt")
    assert top["entries"][:2] == [
        {"name": "a", "kind": "dir", "size": (root / "a").stat().st_size},
        {"name": "b.txt", "kind": "file", "size": 5},
    ]
    assert (top["entries"][2]["name"], top["entries"][2]["kind"], top["truncated"]) == ("c", "symlink", True)
    assert inner == {
        "path": "a",
        "entries": [{"name": "inner.txt", "kind": "file", "size": 1}],
        "truncated": False,
    }
    assert on_file == "'b.txt' is a file, not a directory; read_file reads files"


async def test_glob_returns_sorted_matches_and_never_follows_symlinks(
    settings: WorkspaceSettings, root: Path, outside: Path
) -> None:
    for rel in ("main.py", "src/app.py", "src/util/helpers.py", "src/util/data.json", "docs/index.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    (outside / "evil.py").write_text("x")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    async with connected(settings) as client:
        python = await call(client, "glob", pattern="**/*.py")
        top = await call(client, "glob", pattern="*")
        under = await call(client, "glob", pattern=f"{root}/src/*")
        literal = await call(client, "glob", pattern="docs/index.md")
        nothing = await call(client, "glob", pattern="missing/**/*.py")
        climbing = await refused(client, "glob", pattern="../*")
        elsewhere = await refused(client, "glob", pattern="/etc/*")
    assert python["matches"] == ["main.py", "src/app.py", "src/util/helpers.py"]
    assert (python["total_matches"], python["truncated"], python["note"]) == (3, False, None)
    assert top["matches"] == ["docs/", "escape", "main.py", "src/"]
    assert under["matches"] == ["src/app.py", "src/util/"]
    assert literal["matches"] == ["docs/index.md"]
    assert nothing == {
        "pattern": "missing/**/*.py",
        "matches": [],
        "total_matches": 0,
        "truncated": False,
        "note": None,
    }
    assert climbing == f"glob pattern '../*' contains '..'; patterns stay inside the workspace {root}"
    assert elsewhere == (
        f"glob pattern '/etc/*' is absolute and outside the workspace; give a pattern relative to {root}, "
        "e.g. '**/*.py'"
    )


async def test_glob_caps_results_and_scanning_and_says_so(tmp_path: Path, root: Path) -> None:
    for n in range(6):
        (root / f"f{n}.txt").write_text("x")
    capped = WorkspaceSettings(state_dir=tmp_path / "state", sandbox="none", max_results=2)
    scan = WorkspaceSettings(state_dir=tmp_path / "state", sandbox="none", max_scan_entries=3)
    async with connected(capped) as client:
        few = await call(client, "glob", pattern="*.txt")
    async with connected(scan) as client:
        partial = await call(client, "glob", pattern="*.txt")
    assert few == {
        "pattern": "*.txt",
        "matches": ["f0.txt", "f1.txt"],
        "total_matches": 6,
        "truncated": True,
        "note": "showing the first 2 of 6 matches; narrow the pattern",
    }
    assert (partial["matches"], partial["truncated"]) == (["f0.txt", "f1.txt", "f2.txt"], True)
    assert (
        partial["note"]
        == "stopped after visiting 3 entries (NEXO_WORKSPACE_MAX_SCAN_ENTRIES); narrow the pattern"
    )


async def test_grep_finds_lines_and_filters_files(
    settings: WorkspaceSettings, root: Path, outside: Path
) -> None:
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("import os\nTODO: fix\nprint('todo later')\n")
    (root / "src" / "notes.md").write_text("todo in markdown\n")
    (root / "README.md").write_text("nothing here\r\nTODO readme\r\n")
    (root / "image.png").write_bytes(b"\x89PNG\x00TODO")
    (outside / "secret.txt").write_text("TODO outside\n")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    async with connected(settings) as client:
        everywhere = await call(client, "grep", pattern="TODO")
        folded = await call(client, "grep", pattern="todo", ignore_case=True, glob="*.py")
        by_path = await call(client, "grep", pattern="todo", path="src", glob="**/*.md")
        one_file = await call(client, "grep", pattern=r"^import \w+$", path="src/app.py")
        bad = await refused(client, "grep", pattern="([")
    assert everywhere == {
        "matches": ["README.md:2:TODO readme", "src/app.py:2:TODO: fix"],
        "files_searched": 3,
        "files_skipped": 1,
        "truncated": False,
        "note": None,
    }
    assert folded["matches"] == ["src/app.py:2:TODO: fix", "src/app.py:3:print('todo later')"]
    assert by_path["matches"] == ["src/notes.md:1:todo in markdown"]
    assert one_file["matches"] == ["src/app.py:1:import os"]
    assert bad.startswith("pattern '([' is not a valid Python regular expression: ")


async def test_grep_skips_large_files_and_caps_matches(tmp_path: Path, root: Path) -> None:
    settings = WorkspaceSettings(
        state_dir=tmp_path / "state", sandbox="none", max_read_bytes=100, max_matches=2
    )
    (root / "big.txt").write_text("hit\n" * 30)
    (root / "small.txt").write_text("hit\nhit\nhit\n")
    (root / "wide.txt").write_text("hit " + "w" * 90 + "\n")
    async with connected(settings) as client:
        result = await call(client, "grep", pattern="hit")
    assert result == {
        "matches": ["small.txt:1:hit", "small.txt:2:hit"],
        "files_searched": 1,
        "files_skipped": 1,
        "truncated": True,
        "note": "stopped at 2 matches; narrow the pattern, path or glob",
    }


async def test_the_server_runs_as_a_process_over_stdio(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")}
    env.update({"NEXO_STATE_DIR": str(tmp_path), "NEXO_WORKSPACE_SANDBOX": "none"})
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "servers.workspace"], env=env, cwd=str(REPO)
    )
    with anyio.fail_after(60):
        async with Client(params) as client:
            info = await call(client, "workspace_info")
            written = await call(client, "write_file", path="hello.txt", content="hi\n")
    assert (info["root"], info["sandbox_mode"]) == (str(tmp_path / "workspace"), "none")
    assert written == {"path": "hello.txt", "bytes": 3, "created": True}
    assert (tmp_path / "workspace" / "hello.txt").read_text() == "hi\n"


@pytest.mark.scenario
async def test_a_detached_process_never_outlives_its_unconfined_command(tmp_path: Path) -> None:
    """``setsid -f`` leaves the command's process group; the server adopts and ends it anyway."""
    marker = "95.125"
    env = {k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")}
    env.update({"NEXO_STATE_DIR": str(tmp_path), "NEXO_WORKSPACE_SANDBOX": "none"})
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "servers.workspace"], env=env, cwd=str(REPO)
    )
    with anyio.fail_after(60), killed_afterwards(marker):
        async with Client(params) as client:
            result = await call(client, "shell", command=f"setsid -f sleep {marker}; echo detached")
            left = await survivors(marker)
    assert (result["stdout"], result["exit_code"]) == ("detached\n", 0)
    assert left == []
