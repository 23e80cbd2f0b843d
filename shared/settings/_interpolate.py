"""`${VAR}`, `${VAR:-default}` and `${file:PATH}` references inside configuration strings."""

from __future__ import annotations

import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.settings._problems import ConfigError, ConfigProblem, KeySegment, format_key_path

# `$${` first so an escaped reference is never read as a real one; a bare `${` is one left open.
_TOKEN = re.compile(r"\$\$\{|\$\{([^{}]*)\}|\$\{")
_VARIABLE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)
_SYNTAX_FIX = "write ${NAME}, ${NAME:-default} or ${file:PATH}, and $${ for a literal ${"


@dataclass
class _Context:
    env: Mapping[str, str]
    base_dir: Path
    file: str
    problems: list[ConfigProblem] = field(default_factory=list)

    def report(self, path: list[KeySegment], message: str, fix: str) -> None:
        self.problems.append(ConfigProblem(self.file, format_key_path(path), message, fix))


def interpolate(data: Any, *, env: Mapping[str, str], base_dir: Path, file: str) -> Any:
    """Return `data` with every reference in its strings replaced; ConfigError lists every problem."""
    context = _Context(env, base_dir, file)
    result = _walk(data, [], context)
    if context.problems:
        raise ConfigError(context.problems)
    return result


def _walk(value: Any, path: list[KeySegment], context: _Context) -> Any:
    if isinstance(value, str):
        return _expand(value, path, context)
    if isinstance(value, Mapping):
        return {key: _walk(item, [*path, str(key)], context) for key, item in value.items()}
    if isinstance(value, list):
        return [_walk(item, [*path, index], context) for index, item in enumerate(value)]
    return value


def _expand(text: str, path: list[KeySegment], context: _Context) -> str:
    def replace(match: re.Match[str]) -> str:
        matched = match.group(0)
        if matched == "$${":
            return "${"
        reference = match.group(1)
        if reference is None:
            context.report(path, "a ${ reference is not closed (or is nested)", _SYNTAX_FIX)
            return matched
        if reference.startswith("file:"):
            return _read_secret_file(reference.removeprefix("file:"), path, context)
        variable = _VARIABLE.fullmatch(reference)
        if variable is None:
            context.report(path, f"${{{reference}}} is not a valid reference", _SYNTAX_FIX)
            return matched
        name, default = variable.group(1), variable.group(2)
        value = context.env.get(name, "")
        if value:
            return value
        if default is not None:
            return default
        if name in context.env:
            return ""
        context.report(
            path,
            f"environment variable {name} is not set",
            f"set {name} in the environment or write ${{{name}:-default}}",
        )
        return matched

    return _TOKEN.sub(replace, text)


def _read_secret_file(written: str, path: list[KeySegment], context: _Context) -> str:
    if not written:
        context.report(path, "${file:} names no file", "write ${file:PATH}")
        return ""
    secret = Path(written).expanduser()
    if not secret.is_absolute():
        secret = context.base_dir / secret
    try:
        mode = stat.S_IMODE(secret.stat().st_mode)
        if mode & 0o077:
            context.report(
                path,
                f"secret file {secret} is readable by group or others (mode {mode:04o})",
                f"chmod 600 {secret}",
            )
            return ""
        # Bytes, not text mode: newline translation would alter a secret that contains "\r\n".
        content = secret.read_bytes().decode("utf-8")
    except FileNotFoundError:
        context.report(
            path, f"secret file {secret} does not exist", "create it (mode 600) or correct the path"
        )
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        context.report(path, f"secret file {secret} cannot be read: {reason}", "make it a readable text file")
        return ""
    # Editors end files with a newline that is not part of the secret.
    if content.endswith("\r\n"):
        return content[:-2]
    return content.removesuffix("\n")
