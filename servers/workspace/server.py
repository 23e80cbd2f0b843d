"""MCP tools of the workspace server: files and shell commands, confined to one directory.

The file reading, glob and grep work lives in ``files.py``; path confinement in ``paths.py``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from servers.workspace.arguments import (
    CommandArg,
    ContentArg,
    DirectoryArg,
    FileFilterArg,
    GlobArg,
    IgnoreCaseArg,
    LineLimitArg,
    NewStringArg,
    OffsetArg,
    OldStringArg,
    PathArg,
    RegexArg,
    ReplaceAllArg,
    SearchPathArg,
    TimeoutArg,
)
from servers.workspace.files import (
    FileText,
    GlobResult,
    GrepResult,
    encode_text,
    glob_paths,
    grep_files,
    read_window,
)
from servers.workspace.paths import Confinement, Kind, prepare_root
from servers.workspace.sandbox import Active, Sandbox, probe
from servers.workspace.settings import SandboxMode, WorkspaceSettings
from servers.workspace.shell import (
    MAX_COMMAND_BYTES,
    ShellResult,
    adopt_orphans,
    check_command,
    minimal_env,
    run_command,
)
from servers.workspace.storage import write_or_refuse
from shared.db import StorageCondition
from shared.hosting.main import server_main
from shared.protocol.policy import READ_ONLY_HINTS, classification_meta, tool_hints
from shared.protocol.storage import StorageExtension
from shared.serverkit import NexoServer, progress_while

logger = logging.getLogger("nexo.workspace")

OVERWRITE = tool_hints(destructive=True, idempotent=True)
# An edit removes the text it replaces, so it is not "additive" in the MCP sense of destructive_hint.
EDIT = tool_hints(destructive=True)
SHELL = tool_hints(destructive=True, open_world=True)
SHELL_PROGRESS_EVERY_S = 5.0


@dataclass(frozen=True, slots=True)
class WorkspaceState:
    settings: WorkspaceSettings
    files: Confinement
    sandbox: Sandbox
    storage: StorageCondition


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
    shell: bool
    """Whether the shell tool is offered: only under a working sandbox, or with sandbox none."""
    warning: str | None
    limits: Limits


def build_server(settings: WorkspaceSettings) -> MCPServer[WorkspaceState]:
    @asynccontextmanager
    async def lifespan(server: MCPServer[WorkspaceState]) -> AsyncIterator[WorkspaceState]:
        root = await anyio.to_thread.run_sync(prepare_root, settings.workspace)
        sandbox = await probe(settings.sandbox, settings.bwrap, root, minimal_env(root))
        unavailable = sandbox.unavailable()
        if unavailable is not None:
            # Fail closed: a model never sees a shell it could use outside the sandbox.
            if "shell" in {tool.name for tool in await server.list_tools()}:
                server.remove_tool("shell")
            logger.warning("workspace %s: %s", root, unavailable)
        elif sandbox.warning:
            logger.warning("workspace %s: %s", root, sandbox.warning)
        files = Confinement(root)
        yield WorkspaceState(settings=settings, files=files, sandbox=sandbox, storage=StorageCondition(root))

    server: MCPServer[WorkspaceState] = NexoServer(
        "workspace",
        instructions=(
            f"Files and shell commands inside the workspace directory {settings.workspace}. Paths are "
            "relative to it and may not leave it. Read with read_file, list_dir, glob and grep; change "
            "files with write_file and edit_file; run commands with shell (cwd is the workspace), which is "
            "offered only where commands run in the bubblewrap sandbox (workspace_info says)."
        ),
        lifespan=lifespan,
        extensions=[StorageExtension(lambda state: [state.storage])],
    )

    def state_of(ctx: Context[WorkspaceState]) -> WorkspaceState:
        return ctx.request_context.lifespan_context

    @server.tool(
        title="Read a file",
        annotations=READ_ONLY_HINTS,
        meta=classification_meta("read_only", path_args=("path",), private_data=True),
    )
    def read_file(
        path: PathArg,
        offset: OffsetArg = 1,
        limit: LineLimitArg = None,
        *,
        ctx: Context[WorkspaceState],
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

    @server.tool(
        title="Write a file", annotations=OVERWRITE, meta=classification_meta("write", path_args=("path",))
    )
    def write_file(
        path: PathArg,
        content: ContentArg,
        *,
        ctx: Context[WorkspaceState],
    ) -> Written:
        """Create or overwrite a file with `content` (UTF-8) in one atomic step; missing parent
        directories are created. To change part of a file, use edit_file."""
        state = state_of(ctx)
        data = encode_text(content, "content")
        cap = state.settings.max_write_bytes
        if len(data) > cap:
            raise ToolError(
                f"content is {len(data)} bytes; write_file writes at most {cap} bytes "
                "(NEXO_WORKSPACE_MAX_WRITE_BYTES). Split it into several files"
            )
        located = state.files.locate(path)
        created = write_or_refuse(state.files, state.storage, located, data)
        return Written(path=located.rel, bytes=len(data), created=created)

    @server.tool(
        title="Edit a file", annotations=EDIT, meta=classification_meta("write", path_args=("path",))
    )
    def edit_file(
        path: PathArg,
        old_string: OldStringArg,
        new_string: NewStringArg,
        replace_all: ReplaceAllArg = False,
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
        updated = encode_text(text.replace(old_string, new_string, -1 if replace_all else 1), "new_string")
        if len(updated) > cap:
            raise ToolError(
                f"the edited file would be {len(updated)} bytes, over the {cap}-byte limit "
                "(NEXO_WORKSPACE_MAX_WRITE_BYTES)"
            )
        write_or_refuse(state.files, state.storage, located, updated)
        return Edited(path=located.rel, replacements=count if replace_all else 1, bytes=len(updated))

    @server.tool(
        title="List a directory",
        annotations=READ_ONLY_HINTS,
        meta=classification_meta("read_only", path_args=("path",), private_data=True),
    )
    def list_dir(
        path: DirectoryArg = ".",
        *,
        ctx: Context[WorkspaceState],
    ) -> Listing:
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

    @server.tool(
        title="Find paths by pattern",
        annotations=READ_ONLY_HINTS,
        meta=classification_meta("read_only", private_data=True),
    )
    def glob(
        pattern: GlobArg,
        *,
        ctx: Context[WorkspaceState],
    ) -> GlobResult:
        """Paths matching a glob relative to the workspace root, e.g. '**/*.py' or 'src/*.md'. `*` and
        `?` stay inside one directory, `**` spans any number. Symlinks are listed, never followed."""
        state = state_of(ctx)
        return glob_paths(state.files, pattern, state.settings)

    @server.tool(
        title="Search file contents",
        annotations=READ_ONLY_HINTS,
        meta=classification_meta("read_only", path_args=("path",), private_data=True),
    )
    def grep(
        pattern: RegexArg,
        path: SearchPathArg = ".",
        glob: FileFilterArg = None,
        ignore_case: IgnoreCaseArg = False,
        *,
        ctx: Context[WorkspaceState],
    ) -> GrepResult:
        """Search text files under `path` (a directory or one file) for a Python regular expression.
        `glob` filters files: without '/' it matches file names ('*.py'), with '/' paths relative to
        `path`. Binary files and files over max_read_bytes are skipped."""
        state = state_of(ctx)
        return grep_files(state.files, state.settings, pattern, path, glob, ignore_case)

    # S604: `shell=True` marks the tool's `command` argument for the policy; nothing is spawned here.
    @server.tool(
        title="Run a shell command",
        annotations=SHELL,
        meta=classification_meta("dangerous", shell=True, private_data=True),  # noqa: S604
    )
    async def shell(
        command: CommandArg,
        timeout_s: TimeoutArg = 30,
        *,
        ctx: Context[WorkspaceState],
    ) -> ShellResult:
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
        unavailable = state.sandbox.unavailable()
        if unavailable is not None:
            raise ToolError(unavailable)
        root = state.files.root
        env = minimal_env(root)
        async with progress_while(ctx, total=timeout_s, every_s=SHELL_PROGRESS_EVERY_S):
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

    @server.tool(
        title="Workspace root and limits", annotations=READ_ONLY_HINTS, meta=classification_meta("read_only")
    )
    def workspace_info(*, ctx: Context[WorkspaceState]) -> WorkspaceInfo:
        """The workspace root, whether shell commands are sandboxed (and why), and every size limit."""
        state = state_of(ctx)
        limits = state.settings
        return WorkspaceInfo(
            root=str(state.files.root),
            sandbox=state.sandbox.active,
            sandbox_mode=state.sandbox.mode,
            sandbox_reason=state.sandbox.reason,
            shell=state.sandbox.shell_offered,
            warning=state.sandbox.unavailable() or state.sandbox.warning,
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
    adopt_orphans()
    return server_main("servers.workspace", lambda: build_server(WorkspaceSettings()))
