"""Confinement of every path to the workspace root.

A path is resolved with symlinks followed and must land inside the resolved root. Opening then
walks the resolved path one component at a time from a descriptor of the root with ``O_NOFOLLOW``,
so a symlink swapped in after resolution is refused instead of followed, and the opened
descriptor's ``/proc/self/fd`` link is checked against the root once more.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcp.server.mcpserver.exceptions import ToolError

Kind = Literal["file", "dir", "symlink", "other"]

MAX_DEPTH = 64
"""Deepest directory level glob, grep and list_dir descend to."""
NEW_FILE_MODE = 0o644

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading must not wait for a writer before fstat can refuse it.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class PathRefused(ToolError):
    """A path that leads out of the workspace or names something no tool may open."""


@dataclass(frozen=True, slots=True)
class Located:
    """A path as given, resolved inside the root; ``parts`` are its components below the root."""

    given: str
    real: Path
    parts: tuple[str, ...]

    @property
    def rel(self) -> str:
        return "/".join(self.parts) or "."


@dataclass(frozen=True, slots=True)
class WalkEntry:
    """One directory entry met by :meth:`Confinement.walk`; ``dir_fd`` is valid until the walk moves on."""

    rel: str
    name: str
    kind: Kind
    size: int
    depth: int
    dir_fd: int


def kind_of(mode: int) -> Kind:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def _is_symlink(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def prepare_root(path: Path) -> Path:
    """Create the root (0700) when missing and return its resolved path."""
    real = Path(os.path.realpath(path))
    if real == Path(real.anchor):
        raise ValueError(
            f"the workspace root {path} is the file-system root; set NEXO_WORKSPACE_ROOT to a "
            "directory of its own"
        )
    try:
        real.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise ValueError(
            f"the workspace root {path} exists and is not a directory; set NEXO_WORKSPACE_ROOT to a directory"
        ) from exc
    return real


class Confinement:
    """Resolves and opens paths so that nothing outside ``root`` is ever read or written."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))
        self._check_proc = Path("/proc/self/fd").is_dir()

    def locate(self, path: str) -> Located:
        """Resolve ``path`` (relative to the root, or absolute inside it) with symlinks followed."""
        if "\x00" in path:
            raise PathRefused(f"{path!r} contains a NUL byte; give a plain path inside {self.root}")
        candidate = Path(path)
        absolute = candidate.is_absolute()
        if not absolute:
            candidate = self.root / candidate
        real = Path(os.path.realpath(candidate))
        if not real.is_relative_to(self.root):
            if Path(os.path.normpath(candidate)).is_relative_to(self.root):
                why = "a symlink on the way points out of it"
            elif absolute:
                why = "absolute paths must point inside it"
            else:
                why = "'..' may not climb out of it"
            raise PathRefused(
                f"{path!r} is outside the workspace ({why}); paths must stay inside {self.root}, "
                "and relative paths start there"
            )
        return Located(given=path, real=real, parts=real.relative_to(self.root).parts)

    def kind(self, located: Located) -> Kind | None:
        """What ``located`` is now (symlinks not followed), or None when it does not exist."""
        if not located.parts:
            return "dir"
        try:
            parent = self._open_dirs(located, located.parts[:-1])
        except FileNotFoundError:
            return None
        try:
            return kind_of(os.stat(located.parts[-1], dir_fd=parent, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            return None
        finally:
            os.close(parent)

    def open_dir(self, located: Located) -> int:
        """A descriptor of the directory ``located``; the caller closes it."""
        try:
            return self._open_dirs(located, located.parts)
        except FileNotFoundError:
            raise self.missing(located) from None

    def open_file(self, located: Located) -> int:
        """A read-only descriptor of the regular file ``located``; the caller closes it."""
        if not located.parts:
            raise ToolError(f"{located.given!r} is the workspace directory itself; list_dir shows it")
        try:
            parent = self._open_dirs(located, located.parts[:-1])
        except FileNotFoundError:
            raise self.missing(located) from None
        try:
            return self._open_regular(parent, located.parts[-1], located.given)
        except FileNotFoundError:
            raise self.missing(located) from None
        finally:
            os.close(parent)

    def open_entry(self, entry: WalkEntry) -> int:
        """A read-only descriptor of a regular file met during a walk."""
        return self._open_regular(entry.dir_fd, entry.name, entry.rel)

    def write_atomic(self, located: Located, data: bytes) -> bool:
        """Replace the file's content in one step (temp file + rename); True when it was created.

        Missing parent directories are created inside the root. An existing file keeps its mode.
        """
        if not located.parts:
            raise ToolError(f"{located.given!r} is the workspace directory itself; give a file path")
        parent = self._open_dirs(located, located.parts[:-1], create=True)
        name = located.parts[-1]
        try:
            try:
                current: os.stat_result | None = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                current = None
            if current is not None:
                self._check_writable(located, kind_of(current.st_mode))
            temp = f".{name[:64]}.{secrets.token_hex(6)}.tmp"
            fd = os.open(temp, _TEMP_FLAGS, 0o600, dir_fd=parent)
            try:
                try:
                    self.check_descriptor(fd, located.given)
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fchmod(fd, stat.S_IMODE(current.st_mode) if current else NEW_FILE_MODE)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp, dir_fd=parent)
                raise
            os.fsync(parent)
            return current is None
        finally:
            os.close(parent)

    def walk(
        self, start: Located, *, descend: Callable[[str, int], bool]
    ) -> Generator[WalkEntry, None, None]:
        """Every entry below the directory ``start``, depth first and sorted by name in each directory.

        Symlinks are reported, never followed. ``descend(rel, depth)`` decides whether to enter a
        directory. Close the iterator (``contextlib.closing``) when stopping early.
        """
        fd = self.open_dir(start)
        prefix = "" if not start.parts else f"{start.rel}/"
        try:
            yield from self._walk_fd(fd, prefix, 1, descend)
        finally:
            os.close(fd)

    def _walk_fd(
        self, fd: int, prefix: str, depth: int, descend: Callable[[str, int], bool]
    ) -> Generator[WalkEntry, None, None]:
        with os.scandir(fd) as listing:
            names = sorted(entry.name for entry in listing)
        for name in names:
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            kind = kind_of(info.st_mode)
            rel = f"{prefix}{name}"
            yield WalkEntry(rel=rel, name=name, kind=kind, size=info.st_size, depth=depth, dir_fd=fd)
            if kind != "dir" or depth >= MAX_DEPTH or not descend(rel, depth):
                continue
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # replaced, removed or unreadable since it was listed
            try:
                yield from self._walk_fd(child, f"{rel}/", depth + 1, descend)
            finally:
                os.close(child)

    def _open_dirs(self, located: Located, parts: tuple[str, ...], *, create: bool = False) -> int:
        """Open ``root/parts`` one directory at a time, never following a symlink."""
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for index, part in enumerate(parts):
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, dir_fd=fd)
                    child = self._step(located, fd, parts[: index + 1])
                except OSError as exc:
                    if exc.errno == errno.ENOTDIR and _is_symlink(fd, part):
                        # O_DIRECTORY | O_NOFOLLOW reports a symlink as "not a directory".
                        exc = OSError(errno.ELOOP, os.strerror(errno.ELOOP))
                    raise self._blocked(located, parts[: index + 1], exc) from exc
                os.close(fd)
                fd = child
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _step(self, located: Located, fd: int, parts: tuple[str, ...]) -> int:
        try:
            return os.open(parts[-1], _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR and _is_symlink(fd, parts[-1]):
                exc = OSError(errno.ELOOP, os.strerror(errno.ELOOP))
            raise self._blocked(located, parts, exc) from exc

    def _open_regular(self, parent: int, name: str, given: str) -> int:
        kind = kind_of(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        if kind != "file":
            raise self._not_a_file(given, kind)
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._not_a_file(given, "symlink") from exc
            raise
        try:
            found = kind_of(os.fstat(fd).st_mode)
            if found != "file":
                raise self._not_a_file(given, found)
            self.check_descriptor(fd, given)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def check_descriptor(self, fd: int, given: str) -> None:
        """Refuse a descriptor whose real path (as the kernel reports it) is outside the root."""
        if not self._check_proc:
            return  # no /proc here: the O_NOFOLLOW walk is the only guard
        actual = Path(f"/proc/self/fd/{fd}").readlink()
        if not actual.is_relative_to(self.root):
            raise PathRefused(
                f"{given!r} was opened as {actual}, outside the workspace; paths must stay inside {self.root}"
            )

    def _check_writable(self, located: Located, kind: Kind) -> None:
        if kind == "dir":
            raise ToolError(f"{located.given!r} is a directory; give the path of a file inside it")
        if kind == "symlink":
            raise self._blocked(located, located.parts, OSError(errno.ELOOP, "symlink"))
        if kind != "file":
            raise PathRefused(
                f"{located.given!r} is a device, FIFO or socket; only regular files can be written"
            )

    def _not_a_file(self, given: str, kind: Kind) -> ToolError:
        if kind == "dir":
            return ToolError(f"{given!r} is a directory; list_dir or glob show what is inside")
        if kind == "symlink":
            return PathRefused(
                f"{given!r} turned into a symlink after it was resolved; it is not followed "
                f"(paths must stay inside {self.root})"
            )
        return PathRefused(f"{given!r} is a device, FIFO or socket; only regular files can be read")

    def _blocked(self, located: Located, parts: tuple[str, ...], exc: OSError) -> ToolError:
        where = "/".join(parts)
        if exc.errno == errno.ENOTDIR:
            return ToolError(f"{located.given!r}: {where!r} is a file, not a directory")
        if exc.errno == errno.ELOOP:
            return PathRefused(
                f"{located.given!r}: {where!r} is a symlink (a loop, or swapped in after the path was "
                f"resolved) and is not followed; paths must stay inside {self.root}"
            )
        return ToolError(f"{located.given!r}: cannot open {where!r}: {exc.strerror or exc}")

    def missing(self, located: Located) -> ToolError:
        return ToolError(
            f"{located.given!r} does not exist in the workspace ({located.rel}); "
            "list_dir or glob show what is there"
        )


def _segment_regex(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        i += 1
        if char == "*":
            while i < len(segment) and segment[i] == "*":
                i += 1
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = i + 1 if i < len(segment) and segment[i] in "!^" else i
            if end < len(segment) and segment[end] == "]":
                end += 1
            end = segment.find("]", end)
            if end < 0:
                out.append(re.escape(char))
                continue
            body = segment[i:end].replace("\\", "\\\\")
            i = end + 1
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            out.append(f"(?!/)[{body}]")
        else:
            out.append(re.escape(char))
    return "".join(out)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """The regular expression of a glob over ``/``-separated paths: ``*``, ``?``, ``[...]``, ``**``."""
    segments = pattern.split("/")
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
        else:
            out.append(_segment_regex(segment) + ("" if last else "/"))
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def is_magic(segment: str) -> bool:
    return any(char in segment for char in "*?[")
