"""Loading the one YAML configuration file into a pydantic model."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import yaml
from pydantic import BaseModel

from shared.settings._interpolate import interpolate
from shared.settings._overrides import env_overrides
from shared.settings._problems import ConfigError, ConfigProblem
from shared.settings._validation import validation_problems

M = TypeVar("M", bound=BaseModel)

BUILT_IN = "<built-in defaults>"
ENV_PREFIX = "NEXO_"
ENV_DELIMITER = "__"
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _no_duplicate_keys(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[str] = set()
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:
            continue  # `<<: *anchor` keys may be overridden by the keys written next to them
        key = loader.construct_object(key_node)
        if not isinstance(key, str):
            continue
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping",
                node.start_mark,
                f"found the key {key!r} twice",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node)


class _Loader(yaml.SafeLoader):
    """Safe YAML that refuses a key written twice (plain YAML silently keeps the last one)."""

    yaml_constructors = {  # noqa: RUF012 - the class attribute PyYAML reads
        **yaml.SafeLoader.yaml_constructors,
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG: _no_duplicate_keys,
    }


def _read(path: Path) -> str:
    file = str(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        problem = ConfigProblem(
            file,
            "",
            "the configuration file does not exist",
            "create it or give the path of an existing file",
        )
    except UnicodeDecodeError:
        problem = ConfigProblem(file, "", "the file is not UTF-8 text", "save it as UTF-8")
    except OSError as exc:
        problem = ConfigProblem(
            file, "", f"the file cannot be read: {exc.strerror}", "make it a readable file"
        )
    raise ConfigError([problem])


def parse_yaml(text: str, file: str) -> dict[str, Any]:
    """The top-level mapping of a YAML document (empty text is an empty mapping)."""
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "an unknown place"
        raise ConfigError(
            [
                ConfigProblem(
                    file, "", f"invalid YAML at {where}: {exc.problem}", f"correct the YAML at {where}"
                )
            ]
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            [
                ConfigProblem(
                    file,
                    "",
                    f"the top level is {type(data).__name__}, not a mapping",
                    "write `key: value` lines",
                )
            ]
        )
    return data


def load_config(
    model: type[M],
    path: Path | None,
    *,
    env: Mapping[str, str] | None = None,
    default_text: str | None = None,
    reserved_env: Collection[str] = (),
) -> M:
    """Read, interpolate, apply `NEXO_*` overrides and validate; ConfigError lists every problem."""
    environ: Mapping[str, str] = os.environ if env is None else env
    if path is None:
        file, text, base_dir = BUILT_IN, default_text or "", Path.cwd()
    else:
        file, text, base_dir = str(path), _read(path), path.parent
    data = parse_yaml(text, file)
    problems: list[ConfigProblem] = []
    origins: dict[str, str] = {}
    try:
        data = interpolate(data, env=environ, base_dir=base_dir, file=file)
    except ConfigError as exc:
        problems += exc.problems
    try:
        data, origins = env_overrides(
            data, env=environ, prefix=ENV_PREFIX, delimiter=ENV_DELIMITER, reserved=reserved_env
        )
    except ConfigError as exc:
        problems += exc.problems
    if problems:
        raise ConfigError(problems)
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        # Not chained: the ValidationError's own text shows the input values, secrets included.
        raise ConfigError(validation_problems(exc, model, file=file, origins=origins)) from None
