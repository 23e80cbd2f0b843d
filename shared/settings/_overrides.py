"""`NEXO_SECTION__KEY=value` environment variables that override configuration keys."""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Mapping
from typing import Any

import yaml

from shared.settings._problems import ConfigError, ConfigProblem, KeySegment, format_key_path

# YAML 1.1 would read `0x1f`, `012`, `yes` or `on` as numbers and booleans: ids, PINs and tokens
# written like that stay text. Only plain decimals and true/false are typed.
_DECIMAL = re.compile(r"[-+]?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_ENVIRONMENT = "environment"


def parse_env_value(text: str) -> Any:
    """The typed value of an override: YAML scalars and flow lists/mappings, other text as is."""
    stripped = text.strip()
    if not stripped:
        return text
    try:
        parsed = yaml.safe_load(stripped)
    except yaml.YAMLError:
        return text
    if isinstance(parsed, str):
        # Only a quoted value loses its quotes; `a # b` must not lose its tail to a YAML comment.
        return parsed if stripped[0] in "'\"" else text
    if isinstance(parsed, bool):
        return parsed if stripped.lower() in ("true", "false") else text
    if isinstance(parsed, int | float):
        return parsed if _DECIMAL.fullmatch(stripped) else text
    if isinstance(parsed, list | dict):
        return parsed if stripped[0] in "[{" else text
    return parsed  # null and ~


def apply_env_overrides(
    data: dict[str, Any],
    *,
    env: Mapping[str, str],
    prefix: str = "NEXO_",
    delimiter: str = "__",
    reserved: Collection[str] = (),
) -> dict[str, Any]:
    """A copy of `data` with every `{prefix}A{delimiter}B=value` variable applied as `a.b: value`."""
    result, _ = env_overrides(data, env=env, prefix=prefix, delimiter=delimiter, reserved=reserved)
    return result


def env_overrides(
    data: dict[str, Any],
    *,
    env: Mapping[str, str],
    prefix: str,
    delimiter: str,
    reserved: Collection[str],
) -> tuple[dict[str, Any], dict[str, str]]:
    """Like `apply_env_overrides`, also returning which variable set each key path."""
    result = copy.deepcopy(data)
    skipped = {_reserved_name(name, prefix) for name in reserved}
    origins: dict[str, str] = {}
    problems: list[ConfigProblem] = []
    variables = [name for name in env if name.startswith(prefix)]
    # A list entry can only be appended after the one before it: sort indexes as numbers (2 < 10).
    for name in sorted(variables, key=lambda name: _sort_key(name, prefix, delimiter)):
        segments = [segment.lower() for segment in name[len(prefix) :].split(delimiter)]
        if segments[0] in skipped:
            continue
        if not all(segments):
            problems.append(
                ConfigProblem(
                    _ENVIRONMENT, name, "the name has an empty key", f"use one {delimiter} between keys"
                )
            )
            continue
        problem = _set(result, segments, parse_env_value(env[name]))
        if problem:
            problems.append(ConfigProblem(_ENVIRONMENT, name, *problem))
        else:
            origins[format_key_path(_typed(segments))] = name
    if problems:
        raise ConfigError(problems)
    return result, origins


def _reserved_name(name: str, prefix: str) -> str:
    return name.removeprefix(prefix).lower()


def _sort_key(name: str, prefix: str, delimiter: str) -> list[tuple[int, int, str]]:
    return [
        (0, int(segment), "") if segment.isdigit() else (1, 0, segment)
        for segment in name[len(prefix) :].split(delimiter)
    ]


def _typed(segments: list[str]) -> list[KeySegment]:
    return [int(segment) if segment.isdigit() else segment for segment in segments]


def _set(data: dict[str, Any], segments: list[str], value: Any) -> tuple[str, str] | None:
    """Put `value` at `segments`, creating sections on the way; a (message, fix) when impossible."""
    node: Any = data
    for depth, segment in enumerate(segments):
        key: str | int = segment
        if isinstance(node, list):
            where = format_key_path(_typed(segments[:depth]))
            if not segment.isdigit():
                return f"{where} is a list", "use a number to pick an entry, e.g. __0__"
            key = int(segment)
            if key > len(node):
                return (
                    f"index {key} is past the end of {where} ({len(node)} entries)",
                    f"use an index from 0 to {len(node)}",
                )
            if key == len(node):
                node.append(None)
        if depth == len(segments) - 1:
            node[key] = value
            return None
        child = node[key] if isinstance(key, int) else node.get(key)
        if child is None:
            child = [] if segments[depth + 1].isdigit() else {}
            node[key] = child
        elif not isinstance(child, dict | list):
            return (
                f"{format_key_path(_typed(segments[: depth + 1]))} is a value, not a section",
                "override the whole value instead",
            )
        node = child
    raise AssertionError("segments is never empty")
