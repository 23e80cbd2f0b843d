"""The auto-approve table: which ``confirm`` calls are safe enough to run without asking.

It only ever turns an "ask" into a "run"; everything it cannot vouch for keeps asking. The table:
read-only tools pass; a shell passes only with a read-only, non-destructive command line; a write
tool passes only when every path it names resolves inside the workspace; configuration changes,
code execution, remote triggers, schedule creation, outbound and dangerous tools and unclassified
tools always ask.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.permissions.commands import (
    destructive_reason,
    edits_in_place,
    is_read_only_command,
    unsafe_variable,
)
from orchestrator.permissions.walk import assigned_name

if TYPE_CHECKING:
    from orchestrator.mesh.catalog import CatalogTool

_ALWAYS_ASK = (
    ("config configure configuration settings setting policy permissions", "changes configuration"),
    ("repl eval exec execute python javascript node interpreter notebook code script", "executes code"),
    ("trigger remote", "triggers remote work"),
    ("reminder remind", "creates a schedule"),
)
"""Words in a tool's name that make it ask whatever its arguments are."""
_CREATES = frozenset({"create", "add", "new", "schedule", "set", "put", "register", "update", "edit"})


@dataclass(frozen=True, slots=True)
class AutoDecision:
    allow: bool
    reason: str


def _name_words(name: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return {word.lower() for word in re.split(r"[^A-Za-z0-9]+", spaced) if word}


def _always_asks(tool: CatalogTool) -> str | None:
    """What makes this tool ask whatever its arguments are, judged from its name."""
    words = _name_words(tool.name)
    if "cron" in tool.name.lower() and words & _CREATES:
        return "creates a schedule"
    for vocabulary, what in _ALWAYS_ASK:
        if words.intersection(vocabulary.split()):
            return what
    return None


def _shell(tool: CatalogTool, arguments: Mapping[str, Any]) -> AutoDecision:
    command = arguments.get("command")
    if not isinstance(command, str) or not command.strip():
        return AutoDecision(False, f"{tool.qualified} was called without a command string to inspect")
    if reason := destructive_reason(command):
        return AutoDecision(False, f"destructive command: {reason}")
    if edits_in_place(command):
        return AutoDecision(False, "sed -i edits files in place")
    if (assignment := unsafe_variable(command)) is not None:
        return AutoDecision(
            False,
            f"the command runs with {assigned_name(assignment)} set, which can make a read-only "
            "program run another one; only locale, time-zone and width variables (LANG, LC_*, TZ, "
            "NO_COLOR, COLUMNS, LINES) run unasked",
        )
    if not is_read_only_command(command):
        return AutoDecision(False, "the command may change something; only read-only commands run unasked")
    return AutoDecision(True, "read-only shell command")


def _resolve(raw: str, root: Path) -> Path:
    """Where a write to ``raw`` (relative paths are relative to the workspace) really lands."""
    # realpath resolves every symlink of the existing part and keeps a missing tail as written, so a
    # new file in a new directory is judged by the real directory it would be created in.
    return Path(os.path.realpath(root / raw))


def _paths(tool: CatalogTool, arguments: Mapping[str, Any], workspace: Path | None) -> AutoDecision:
    if workspace is None:
        return AutoDecision(False, "no workspace is configured, so file writes always ask")
    if not tool.path_args:
        return AutoDecision(
            False, f"{tool.qualified} declares no path arguments, so where it writes is unknown"
        )
    paths: list[str] = []
    for name in tool.path_args:
        value = arguments.get(name)
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, str) and v and "\0" not in v for v in values):
            return AutoDecision(False, f"argument {name!r} is not a path")
        paths.extend(values)
    if not paths:
        return AutoDecision(False, f"none of its path arguments ({', '.join(tool.path_args)}) was given")
    root = Path(os.path.realpath(workspace))
    for raw in paths:
        resolved = _resolve(raw, root)
        if not resolved.is_relative_to(root):
            return AutoDecision(False, f"{raw!r} resolves to {resolved}, outside the workspace {root}")
    return AutoDecision(True, f"writes only inside the workspace {root}")


def auto_approve(tool: CatalogTool, arguments: Mapping[str, Any], workspace: Path | None) -> AutoDecision:
    """Whether a call that would ask may run unasked, and why (a short sentence either way)."""
    if tool.shell:
        return _shell(tool, arguments)
    classification = tool.classification
    if classification is None:
        return AutoDecision(False, f"{tool.qualified} is unclassified, so it always asks")
    if classification == "read_only":
        return AutoDecision(True, "read-only tool")
    if what := _always_asks(tool):
        return AutoDecision(False, f"{tool.qualified} {what}, which always asks")
    if classification == "write":
        return _paths(tool, arguments, workspace)
    return AutoDecision(False, f"{classification} tools always ask")
