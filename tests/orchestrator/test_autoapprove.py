"""The auto-approve table: read-only passes, shells by their command, writes only inside the workspace."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from orchestrator.mesh import CatalogTool
from orchestrator.permissions import AutoDecision, auto_approve
from shared.protocol.policy import Classification


def _tool(
    name: str,
    classification: Classification | None,
    *,
    shell: bool = False,
    path_args: tuple[str, ...] = (),
    server: str = "fs",
) -> CatalogTool:
    return CatalogTool(
        server,
        name,
        f"{server}__{name}",
        "",
        {},
        read_only=False,
        destructive=False,
        classification=classification,
        shell=shell,
        path_args=path_args,
    )


SHELL = _tool("run", "dangerous", shell=True, server="sh")  # noqa: S604 -- a catalog flag, no subprocess
WRITE = _tool("write_file", "write", path_args=("path",))
COPY = _tool("copy", "write", path_args=("source", "destination"))
MANY = _tool("write_many", "write", path_args=("paths",))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with a file, a directory, and symlinks pointing inside and outside it."""
    base = Path(os.path.realpath(tmp_path))
    root = base / "ws"
    outside = base / "outside"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    (root / "src" / "app.py").write_text("print(1)\n")
    (outside / "secret").write_text("x\n")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "secret_link").symlink_to(outside / "secret")
    (root / "dangling").symlink_to(outside / "not-yet")
    (root / "inner_link").symlink_to(root / "src", target_is_directory=True)
    return root


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ls -la", AutoDecision(True, "read-only shell command")),
        ("git status && git diff", AutoDecision(True, "read-only shell command")),
        ("grep -rn TODO src | head", AutoDecision(True, "read-only shell command")),
        (
            "rm -rf build",
            AutoDecision(False, "destructive command: rm -r/-f deletes files and directories without asking"),
        ),
        (
            "git push --force",
            AutoDecision(False, "destructive command: git push --force rewrites the remote branch's history"),
        ),
        ("sed -i 's/a/b/' app.py", AutoDecision(False, "sed -i edits files in place")),
        (
            "touch new.txt",
            AutoDecision(False, "the command may change something; only read-only commands run unasked"),
        ),
        (
            "ls > listing.txt",
            AutoDecision(False, "the command may change something; only read-only commands run unasked"),
        ),
        (
            "ls 'unterminated",
            AutoDecision(False, "the command may change something; only read-only commands run unasked"),
        ),
    ],
)
def test_a_shell_passes_only_with_a_read_only_harmless_command(command: str, expected: AutoDecision) -> None:
    assert auto_approve(SHELL, {"command": command}, None) == expected


@pytest.mark.parametrize("arguments", [{}, {"command": ""}, {"command": ["ls"]}, {"command": "   "}])
def test_a_shell_call_without_a_command_string_asks(arguments: dict[str, Any]) -> None:
    assert auto_approve(SHELL, arguments, None) == AutoDecision(
        False, "sh__run was called without a command string to inspect"
    )


def test_a_read_only_tool_passes_and_an_unclassified_one_asks() -> None:
    assert auto_approve(_tool("search", "read_only"), {}, None) == AutoDecision(True, "read-only tool")
    assert auto_approve(_tool("mystery", None), {}, None) == AutoDecision(
        False, "fs__mystery is unclassified, so it always asks"
    )


@pytest.mark.parametrize(
    ("name", "classification", "what"),
    [
        ("set_config", "write", "changes configuration"),
        ("updateSettings", "write", "changes configuration"),
        ("run_code", "write", "executes code"),
        ("python_repl", "dangerous", "executes code"),
        ("eval", "write", "executes code"),
        ("remote_trigger", "outbound", "triggers remote work"),
        ("cron_create", "write", "creates a schedule"),
        ("cron_add", "write", "creates a schedule"),
        ("addCronJob", "write", "creates a schedule"),
        ("reminder", "write", "creates a schedule"),
    ],
)
def test_config_code_remote_and_schedule_tools_always_ask(
    name: str, classification: Classification, what: str, workspace: Path
) -> None:
    tool = _tool(name, classification, path_args=("path",))
    decision = auto_approve(tool, {"path": "src/x"}, workspace)
    assert decision == AutoDecision(False, f"fs__{name} {what}, which always asks")


@pytest.mark.parametrize(
    ("classification", "reason"),
    [("outbound", "outbound tools always ask"), ("dangerous", "dangerous tools always ask")],
)
def test_outbound_and_dangerous_non_shell_tools_always_ask(
    classification: Classification, reason: str, workspace: Path
) -> None:
    tool = _tool("send", classification, path_args=("path",))
    assert auto_approve(tool, {"path": "src/app.py"}, workspace) == AutoDecision(False, reason)


def test_a_read_only_schedule_listing_passes() -> None:
    assert auto_approve(_tool("cron_list", "read_only"), {}, None) == AutoDecision(True, "read-only tool")


@pytest.mark.parametrize(
    "path",
    [
        "src/app.py",
        "src/new.py",
        "new_dir/deeper/file.txt",
        "./src/../src/app.py",
        "inner_link/app.py",
        "inner_link/new/file.txt",
        ".",
    ],
)
def test_a_write_inside_the_workspace_passes(path: str, workspace: Path) -> None:
    decision = auto_approve(WRITE, {"path": path}, workspace)
    assert decision == AutoDecision(True, f"writes only inside the workspace {workspace}")


def test_an_absolute_path_inside_the_workspace_passes(workspace: Path) -> None:
    decision = auto_approve(WRITE, {"path": str(workspace / "src" / "new.py")}, workspace)
    assert decision.allow is True


@pytest.mark.parametrize(
    ("path", "lands_in"),
    [
        ("../outside/secret", "outside/secret"),
        ("src/../../outside/x", "outside/x"),
        ("escape/secret", "outside/secret"),
        ("escape/new_dir/file", "outside/new_dir/file"),
        ("secret_link", "outside/secret"),
        ("dangling", "outside/not-yet"),
        ("new_dir/../../outside/y", "outside/y"),
        ("/etc/passwd", None),
    ],
)
def test_a_write_that_resolves_outside_the_workspace_asks(
    path: str, lands_in: str | None, workspace: Path
) -> None:
    resolved = str(workspace.parent / lands_in) if lands_in else os.path.realpath("/etc/passwd")
    assert auto_approve(WRITE, {"path": path}, workspace) == AutoDecision(
        False, f"{path!r} resolves to {resolved}, outside the workspace {workspace}"
    )


def test_every_path_argument_must_be_inside(workspace: Path) -> None:
    inside = {"source": "src/app.py", "destination": "src/copy.py"}
    assert auto_approve(COPY, inside, workspace).allow is True
    leaking = {"source": "src/app.py", "destination": "escape/copy.py"}
    assert auto_approve(COPY, leaking, workspace).allow is False
    assert auto_approve(MANY, {"paths": ["src/a", "src/b"]}, workspace).allow is True
    assert auto_approve(MANY, {"paths": ["src/a", "../b"]}, workspace).allow is False


@pytest.mark.parametrize(
    ("tool", "arguments", "reason"),
    [
        (WRITE, {"path": 3}, "argument 'path' is not a path"),
        (WRITE, {"path": ""}, "argument 'path' is not a path"),
        (WRITE, {"path": "a\0b"}, "argument 'path' is not a path"),
        (MANY, {"paths": []}, "argument 'paths' is not a path"),
        (MANY, {"paths": ["ok", 1]}, "argument 'paths' is not a path"),
        (WRITE, {"content": "x"}, "none of its path arguments (path) was given"),
        (
            _tool("write_blob", "write"),
            {"path": "src/x"},
            "fs__write_blob declares no path arguments, so where it writes is unknown",
        ),
    ],
)
def test_a_write_whose_target_cannot_be_checked_asks(
    tool: CatalogTool, arguments: dict[str, Any], reason: str, workspace: Path
) -> None:
    assert auto_approve(tool, arguments, workspace) == AutoDecision(False, reason)


def test_without_a_workspace_writes_always_ask() -> None:
    assert auto_approve(WRITE, {"path": "x"}, None) == AutoDecision(
        False, "no workspace is configured, so file writes always ask"
    )


def test_a_symlinked_workspace_is_judged_by_its_real_location(workspace: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(workspace, target_is_directory=True)
    assert auto_approve(WRITE, {"path": str(workspace / "src" / "x.py")}, alias).allow is True
    assert auto_approve(WRITE, {"path": "escape/x"}, alias).allow is False
