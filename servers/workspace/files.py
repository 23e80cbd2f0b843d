"""Reading, finding and searching text files in the workspace: the work behind read_file, glob and grep.

Everything here goes through a ``Confinement``, so no path leaves the workspace root; the tools in
``server.py`` validate their arguments and hand over to these functions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import closing
from itertools import takewhile
from typing import BinaryIO

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from servers.workspace.paths import Confinement, Located, glob_regex, is_magic
from servers.workspace.settings import WorkspaceSettings

SNIFF_BYTES = 8192
"""A NUL byte in a file's first 8 KiB marks it binary."""
MAX_LINE_CHARS = 400
"""Longest matched line grep shows; longer ones are shortened."""


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


def encode_text(text: str, what: str) -> bytes:
    """``text`` as UTF-8; ``what`` names the argument in the error when it holds lone surrogates."""
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


def glob_paths(files: Confinement, pattern: str, limits: WorkspaceSettings) -> GlobResult:
    """The paths matching ``pattern``, walking only below its literal prefix, within the scan limits."""
    segments = _pattern_segments(pattern, str(files.root))
    literal = list(takewhile(lambda part: not is_magic(part), segments))
    base_parts = literal if len(literal) < len(segments) else literal[:-1]
    shown_base = "/".join(base_parts)
    base = files.locate(shown_base or ".")
    if files.kind(base) != "dir":
        return GlobResult(pattern=pattern, matches=[], total_matches=0, truncated=False)
    regex = glob_regex("/".join(segments))
    deep = "**" in segments
    matches: list[str] = []
    scanned = 0
    complete = True
    walk = files.walk(base, descend=lambda rel, depth: deep or len(base_parts) + depth < len(segments))
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
        notes.append(f"showing the first {limits.max_results} of {len(matches)} matches; narrow the pattern")
    return GlobResult(
        pattern=pattern,
        matches=matches[: limits.max_results],
        total_matches=len(matches),
        truncated=bool(notes),
        note="; ".join(notes) or None,
    )


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


def grep_files(
    files: Confinement,
    limits: WorkspaceSettings,
    pattern: str,
    path: str,
    glob: str | None,
    ignore_case: bool,
) -> GrepResult:
    """Lines matching the regular expression ``pattern`` in one file or every text file under a directory."""
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"pattern {pattern!r} is not a valid Python regular expression: {exc}") from exc
    located = files.locate(path)
    kind = files.kind(located)
    if kind is None:
        raise files.missing(located)
    room = limits.max_matches + 1
    matches: list[str] = []
    searched = skipped = 0
    complete = True
    if kind == "file":
        searched = 1
        with os.fdopen(files.open_file(located), "rb") as handle:
            if not _search(handle, located.rel, regex, matches, room, limits.max_read_bytes):
                searched, skipped = 0, 1
    else:
        wanted = glob_regex(glob) if glob else None
        by_name = glob is not None and "/" not in glob
        prefix = len(located.rel) + 1 if located.parts else 0
        scanned = 0
        with closing(files.walk(located, descend=lambda rel, depth: True)) as walk:
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
                    handle = os.fdopen(files.open_entry(entry), "rb")
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
