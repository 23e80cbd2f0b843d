"""MCP tools of the workspace server: files and shell commands, confined to one directory."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass
from itertools import takewhile
from typing import BinaryIO

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel

from servers.workspace.paths import Confinement, Kind, Located, glob_regex, is_magic, prepare_root
from servers.workspace.sandbox import Active, Sandbox, probe
from servers.workspace.settings import SandboxMode, WorkspaceSettings
from servers.workspace.shell import MAX_COMMAND_BYTES, ShellResult, check_command, minimal_env, run_command
from shared.hosting import server_main
from shared.protocol.policy import classification_meta

logger = logging.getLogger("nexo.workspace")

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
OVERWRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
# An edit removes the text it replaces, so it is not "additive" in the MCP sense of destructive_hint.
EDIT = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
SHELL = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
)

SNIFF_BYTES = 8192
"""A NUL byte in a file's first 8 KiB marks it binary."""
MAX_LINE_CHARS = 400
"""Longest matched line grep shows; longer ones are shortened."""


@dataclass(frozen=True, slots=True)
class WorkspaceState:
    settings: WorkspaceSettings
    files: Confinement
    sandbox: Sandbox


class FileText(BaseModel):
    path: str
    content: str
    """The lines exactly as stored (no line numbers added), decoded as UTF-8."""
    first_line: int
    last_line: int
    """The last line in ``content`` (``first_line - 1`` when it is empty)."""
    total_lines: int
    truncated: bool
    """More of the file exists than ``content`` shows (a line over max_read_bytes is cut)."""
    next_offset: int | None
    """The ``offset`` that continues a truncated read."""


class Written(BaseModel):
    path: str
    bytes: int
    created: bool


class Edited(BaseModel):
    path: str
    replacements: int
    bytes: int


class DirEntry(BaseModel):
    name: str
    kind: Kind
    size: int


class Listing(BaseModel):
    path: str
    entries: list[DirEntry]
    truncated: bool


class GlobResult(BaseModel):
    pattern: str
    matches: list[str]
    """Paths relative to the workspace root, sorted; directories end with ``/``."""
    total_matches: int
    truncated: bool
    note: str | None = None


class GrepResult(BaseModel):
    matches: list[str]
    """``path:line:text`` for each matching line."""
    files_searched: int
    files_skipped: int
    """Binary files, files over max_read_bytes and files that could not be opened."""
    truncated: bool
    note: str | None = None


class Limits(BaseModel):
    max_read_bytes: int
    max_write_bytes: int
    max_output_bytes: int
    max_command_bytes: int
    shell_timeout_max_s: float
    max_results: int
    max_matches: int
    max_scan_entries: int


class WorkspaceInfo(BaseModel):
    root: str
    sandbox: Active
    sandbox_mode: SandboxMode
    sandbox_reason: str
    warning: str | None
    limits: Limits


def _capped_lines(handle: BinaryIO, cap: int) -> Iterator[tuple[bytes, bool]]:
    """Each line (with its newline) cut to ``cap`` bytes, and whether it was cut."""
    while line := handle.readline(cap):
        cut = False
        if not line.endswith(b"\n"):
            while rest := handle.readline(cap):
                cut = True
                if rest.endswith(b"\n"):
                    break
        yield line, cut


def _count_rest(handle: BinaryIO) -> int:
    count, tail = 0, b"\n"
    while chunk := handle.read(1 << 20):
        count += chunk.count(b"\n")
        tail = chunk
    return count + (0 if tail.endswith(b"\n") else 1)


def read_window(handle: BinaryIO, rel: str, offset: int, limit: int | None, max_bytes: int) -> FileText:
    """Lines ``offset`` .. ``offset + limit - 1`` of a text file, at most ``max_bytes`` of them."""
    if b"\x00" in handle.read(SNIFF_BYTES):
        raise ToolError(
            f"{rel!r} is a binary file; read_file returns text only (try shell: `xxd {rel} | head`)"
        )
    handle.seek(0)
    end = None if limit is None else offset + limit - 1
    kept: list[bytes] = []
    used = number = 0
    truncated = False
    next_offset: int | None = None
    for line, cut in _capped_lines(handle, max_bytes):
        number += 1
        if number < offset:
            continue
        if (end is not None and number > end) or used + len(line) > max_bytes:
            truncated, next_offset = True, number
            number += _count_rest(handle)
            break
        kept.append(line)
        used += len(line)
        truncated = truncated or cut
    if offset > max(number, 1):
        raise ToolError(f"offset {offset} is past the end of {rel!r}, which has {number} lines")
    return FileText(
        path=rel,
        content=b"".join(kept).decode("utf-8", errors="replace"),
        first_line=offset,
        last_line=offset + len(kept) - 1,
        total_lines=number,
        truncated=truncated,
        next_offset=next_offset,
    )


def _encode(text: str, what: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise ToolError(f"{what} is not valid Unicode text ({exc.reason} at {exc.start}); fix it") from exc


def _pattern_segments(pattern: str, root: str) -> list[str]:
    text = pattern
    if text.startswith("/"):
        if not (text + "/").startswith(root + "/"):
            raise ToolError(
                f"glob pattern {pattern!r} is absolute and outside the workspace; "
                f"give a pattern relative to {root}, e.g. '**/*.py'"
            )
        text = text[len(root) :]
    segments = [part for part in text.split("/") if part not in ("", ".")]
    if ".." in segments:
        raise ToolError(f"glob pattern {pattern!r} contains '..'; patterns stay inside the workspace {root}")
    if not segments:
        raise ToolError(f"glob pattern {pattern!r} matches nothing; give one such as '**/*.py' or 'src/*'")
    return segments


def _shown(entry_rel: str, base: Located, shown_base: str) -> str:
    """The path of an entry under the pattern's literal prefix, as the pattern spells that prefix."""
    below = entry_rel if not base.parts else entry_rel[len(base.rel) + 1 :]
    return f"{shown_base}/{below}" if shown_base else below


def _search(
    handle: BinaryIO, rel: str, regex: re.Pattern[str], matches: list[str], room: int, max_bytes: int
) -> bool:
    """Append matching lines of one file; False when it was skipped as binary or too large."""
    data = handle.read(max_bytes + 1)
    if len(data) > max_bytes or b"\x00" in data[:SNIFF_BYTES]:
        return False
    for number, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), 1):
        if len(matches) >= room:
            break
        text = line.removesuffix("\r")
        if regex.search(text):
            if len(text) > MAX_LINE_CHARS:
                text = text[: MAX_LINE_CHARS - 1] + "…"
            matches.append(f"{rel}:{number}:{text}")
    return True


def build_server(settings: WorkspaceSettings) -> MCPServer[WorkspaceState]:
    @asynccontextmanager
    async def lifespan(_: MCPServer[WorkspaceState]) -> AsyncIterator[WorkspaceState]:
        root = await anyio.to_thread.run_sync(prepare_root, settings.workspace)
        sandbox = await probe(settings.sandbox, settings.bwrap, root, minimal_env(root))
        if sandbox.warning:
            logger.warning("workspace %s: %s (%s)", root, sandbox.warning, sandbox.reason)
        yield WorkspaceState(settings=settings, files=Confinement(root), sandbox=sandbox)

    server: MCPServer[WorkspaceState] = MCPServer(
        "workspace",
        instructions=(
            f"Files and shell commands inside the workspace directory {settings.workspace}. Paths are "
            "relative to it and may not leave it. Read with read_file, list_dir, glob and grep; change "
            "files with write_file and edit_file; run commands with shell (cwd is the workspace)."
        ),
        lifespan=lifespan,
        log_level="WARNING",
    )

    def state_of(ctx: Context[WorkspaceState]) -> WorkspaceState:
        return ctx.request_context.lifespan_context

    @server.tool(annotations=READ_ONLY, meta=classification_meta("read_only", path_args=("path",)))
    def read_file(
        path: str, offset: int = 1, limit: int | None = None, *, ctx: Context[WorkspaceState]
    ) -> FileText:
        """Read a UTF-8 text file from line `offset` (1-based), at most `limit` lines and max_read_bytes.
        The content is exactly as stored; when truncated, call again with offset=next_offset."""
        state = state_of(ctx)
        if offset < 1:
            raise ToolError(f"offset is a 1-based line number; got {offset!r}. Use 1 for the start")
        if limit is not None and limit < 1:
            raise ToolError(f"limit must be at least 1 line; got {limit!r}. Omit it to read to the cap")
        located = state.files.locate(path)
        with os.fdopen(state.files.open_file(located), "rb") as handle:
            return read_window(handle, located.rel, offset, limit, state.settings.max_read_bytes)

    @server.tool(annotations=OVERWRITE, meta=classification_meta("write", path_args=("path",)))
    def write_file(path: str, content: str, *, ctx: Context[WorkspaceState]) -> Written:
        """Create or overwrite a file with `content` (UTF-8) in one atomic step; missing parent
        directories are created. To change part of a file, use edit_file."""
        state = state_of(ctx)
        data = _encode(content, "content")
        cap = state.settings.max_write_bytes
        if len(data) > cap:
            raise ToolError(
                f"content is {len(data)} bytes; write_file writes at most {cap} bytes "
                "(NEXO_WORKSPACE_MAX_WRITE_BYTES). Split it into several files"
            )
        located = state.files.locate(path)
        created = state.files.write_atomic(located, data)
        return Written(path=located.rel, bytes=len(data), created=created)

    @server.tool(annotations=EDIT, meta=classification_meta("write", path_args=("path",)))
    def edit_file(
        path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
        *,
        ctx: Context[WorkspaceState],
    ) -> Edited:
        """Replace `old_string` with `new_string` in a UTF-8 text file. `old_string` must match exactly
        (whitespace included) and occur once, unless replace_all is true."""
        state = state_of(ctx)
        cap = state.settings.max_write_bytes
        if not old_string:
            raise ToolError("old_string is empty; give the exact text to replace, or use write_file")
        if old_string == new_string:
            raise ToolError("old_string and new_string are the same, so nothing would change")
        located = state.files.locate(path)
        with os.fdopen(state.files.open_file(located), "rb") as handle:
            data = handle.read(cap + 1)
        if len(data) > cap:
            raise ToolError(
                f"{located.rel!r} is larger than {cap} bytes, the most edit_file rewrites "
                "(NEXO_WORKSPACE_MAX_WRITE_BYTES); edit it with a script through shell"
            )
        try:
            text = data.decode()
        except UnicodeDecodeError as exc:
            raise ToolError(f"{located.rel!r} is not UTF-8 text; edit_file edits UTF-8 text only") from exc
        count = text.count(old_string)
        if count == 0:
            raise ToolError(
                f"old_string was not found in {located.rel!r} (0 matches); it must match the file exactly, "
                "including whitespace and indentation: read_file shows the current text"
            )
        if count > 1 and not replace_all:
            raise ToolError(
                f"old_string occurs {count} times in {located.rel!r}; include more surrounding text to "
                "make it unique, or pass replace_all=true to replace every occurrence"
            )
        updated = _encode(text.replace(old_string, new_string, -1 if replace_all else 1), "new_string")
        if len(updated) > cap:
            raise ToolError(
                f"the edited file would be {len(updated)} bytes, over the {cap}-byte limit "
                "(NEXO_WORKSPACE_MAX_WRITE_BYTES)"
            )
        state.files.write_atomic(located, updated)
        return Edited(path=located.rel, replacements=count if replace_all else 1, bytes=len(updated))

    @server.tool(annotations=READ_ONLY, meta=classification_meta("read_only", path_args=("path",)))
    def list_dir(path: str = ".", *, ctx: Context[WorkspaceState]) -> Listing:
        """The entries of one directory (not recursive), sorted by name, with kind and size in bytes.
        Symlinks are shown as such, never followed."""
        state = state_of(ctx)
        located = state.files.locate(path)
        kind = state.files.kind(located)
        if kind is None:
            raise state.files.missing(located)
        if kind != "dir":
            raise ToolError(f"{path!r} is a {kind}, not a directory; read_file reads files")
        entries: list[DirEntry] = []
        truncated = False
        with closing(state.files.walk(located, descend=lambda rel, depth: False)) as walk:
            for entry in walk:
                if len(entries) == state.settings.max_results:
                    truncated = True
                    break
                entries.append(DirEntry(name=entry.name, kind=entry.kind, size=entry.size))
        return Listing(path=located.rel, entries=entries, truncated=truncated)

    @server.tool(annotations=READ_ONLY, meta=classification_meta("read_only"))
    def glob(pattern: str, *, ctx: Context[WorkspaceState]) -> GlobResult:
        """Paths matching a glob relative to the workspace root, e.g. '**/*.py' or 'src/*.md'. `*` and
        `?` stay inside one directory, `**` spans any number. Symlinks are listed, never followed."""
        state = state_of(ctx)
        limits = state.settings
        segments = _pattern_segments(pattern, str(state.files.root))
        literal = list(takewhile(lambda part: not is_magic(part), segments))
        base_parts = literal if len(literal) < len(segments) else literal[:-1]
        shown_base = "/".join(base_parts)
        base = state.files.locate(shown_base or ".")
        if state.files.kind(base) != "dir":
            return GlobResult(pattern=pattern, matches=[], total_matches=0, truncated=False)
        regex = glob_regex("/".join(segments))
        deep = "**" in segments
        matches: list[str] = []
        scanned = 0
        complete = True
        walk = state.files.walk(
            base, descend=lambda rel, depth: deep or len(base_parts) + depth < len(segments)
        )
        with closing(walk):
            for entry in walk:
                scanned += 1
                if scanned > limits.max_scan_entries:
                    complete = False
                    break
                shown = _shown(entry.rel, base, shown_base)
                if regex.match(shown):
                    matches.append(shown + "/" if entry.kind == "dir" else shown)
        matches.sort()
        notes = []
        if not complete:
            notes.append(
                f"stopped after visiting {limits.max_scan_entries} entries "
                "(NEXO_WORKSPACE_MAX_SCAN_ENTRIES); narrow the pattern"
            )
        if len(matches) > limits.max_results:
            notes.append(
                f"showing the first {limits.max_results} of {len(matches)} matches; narrow the pattern"
            )
        return GlobResult(
            pattern=pattern,
            matches=matches[: limits.max_results],
            total_matches=len(matches),
            truncated=bool(notes),
            note="; ".join(notes) or None,
        )

    @server.tool(annotations=READ_ONLY, meta=classification_meta("read_only", path_args=("path",)))
    def grep(
        pattern: str,
        path: str = ".",
        glob: str | None = None,
        ignore_case: bool = False,
        *,
        ctx: Context[WorkspaceState],
    ) -> GrepResult:
        """Search text files under `path` (a directory or one file) for a Python regular expression.
        `glob` filters files: without '/' it matches file names ('*.py'), with '/' paths relative to
        `path`. Binary files and files over max_read_bytes are skipped."""
        state = state_of(ctx)
        limits = state.settings
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise ToolError(f"pattern {pattern!r} is not a valid Python regular expression: {exc}") from exc
        located = state.files.locate(path)
        kind = state.files.kind(located)
        if kind is None:
            raise state.files.missing(located)
        room = limits.max_matches + 1
        matches: list[str] = []
        searched = skipped = 0
        complete = True
        if kind == "file":
            searched = 1
            with os.fdopen(state.files.open_file(located), "rb") as handle:
                if not _search(handle, located.rel, regex, matches, room, limits.max_read_bytes):
                    searched, skipped = 0, 1
        else:
            wanted = glob_regex(glob) if glob else None
            by_name = glob is not None and "/" not in glob
            prefix = len(located.rel) + 1 if located.parts else 0
            scanned = 0
            with closing(state.files.walk(located, descend=lambda rel, depth: True)) as walk:
                for entry in walk:
                    scanned += 1
                    if scanned > limits.max_scan_entries:
                        complete = False
                        break
                    if len(matches) >= room:
                        break
                    if entry.kind != "file":
                        continue
                    if wanted and not wanted.match(entry.name if by_name else entry.rel[prefix:]):
                        continue
                    if entry.size > limits.max_read_bytes:
                        skipped += 1
                        continue
                    try:
                        handle = os.fdopen(state.files.open_entry(entry), "rb")
                    except (OSError, ToolError):
                        skipped += 1
                        continue
                    with handle:
                        found = _search(handle, entry.rel, regex, matches, room, limits.max_read_bytes)
                    searched, skipped = searched + found, skipped + (not found)
        notes = []
        if len(matches) > limits.max_matches:
            notes.append(f"stopped at {limits.max_matches} matches; narrow the pattern, path or glob")
        if not complete:
            notes.append(
                f"stopped after visiting {limits.max_scan_entries} entries "
                "(NEXO_WORKSPACE_MAX_SCAN_ENTRIES); give a narrower path"
            )
        return GrepResult(
            matches=matches[: limits.max_matches],
            files_searched=searched,
            files_skipped=skipped,
            truncated=bool(notes),
            note="; ".join(notes) or None,
        )

    # S604: `shell=True` marks the tool's `command` argument for the policy; nothing is spawned here.
    @server.tool(annotations=SHELL, meta=classification_meta("dangerous", shell=True))  # noqa: S604
    async def shell(command: str, timeout_s: float = 30, *, ctx: Context[WorkspaceState]) -> ShellResult:
        """Run a command line with /bin/sh -c in the workspace directory, stdin empty, a minimal
        environment and no network when sandboxed. Output is capped; the command and everything it
        started are killed at timeout_s. Edit files with edit_file, not `sed -i`."""
        state = state_of(ctx)
        check_command(command)
        cap = state.settings.shell_timeout_max_s
        if not 0 < timeout_s <= cap:
            raise ToolError(
                f"timeout_s must be above 0 and at most {cap:g} seconds "
                f"(NEXO_WORKSPACE_SHELL_TIMEOUT_MAX_S); got {timeout_s!r}"
            )
        refusal = state.sandbox.refusal()
        if refusal:
            raise ToolError(refusal)
        root = state.files.root
        env = minimal_env(root)
        done = await run_command(
            state.sandbox.wrap(["/bin/sh", "-c", command], root, env),
            cwd=root,
            env=env,
            timeout_s=timeout_s,
            max_output_bytes=state.settings.max_output_bytes,
        )
        return ShellResult(
            exit_code=done.exit_code,
            stdout=done.stdout,
            stderr=done.stderr,
            stdout_bytes=done.stdout_bytes,
            stderr_bytes=done.stderr_bytes,
            timed_out=done.timed_out,
            truncated=done.truncated,
            sandbox=state.sandbox.active,
            duration_ms=done.duration_ms,
            warning=state.sandbox.warning,
        )

    @server.tool(annotations=READ_ONLY, meta=classification_meta("read_only"))
    def workspace_info(*, ctx: Context[WorkspaceState]) -> WorkspaceInfo:
        """The workspace root, whether shell commands are sandboxed (and why), and every size limit."""
        state = state_of(ctx)
        limits = state.settings
        return WorkspaceInfo(
            root=str(state.files.root),
            sandbox=state.sandbox.active,
            sandbox_mode=state.sandbox.mode,
            sandbox_reason=state.sandbox.reason,
            warning=state.sandbox.warning,
            limits=Limits(
                max_read_bytes=limits.max_read_bytes,
                max_write_bytes=limits.max_write_bytes,
                max_output_bytes=limits.max_output_bytes,
                max_command_bytes=MAX_COMMAND_BYTES,
                shell_timeout_max_s=limits.shell_timeout_max_s,
                max_results=limits.max_results,
                max_matches=limits.max_matches,
                max_scan_entries=limits.max_scan_entries,
            ),
        )

    return server


def main() -> int:
    return server_main("servers.workspace", lambda: build_server(WorkspaceSettings()))
