"""The YAML side of loading a config: safe YAML that refuses a key written twice, with clear errors.

Apart from the pydantic validation (:mod:`shared.settings._load`) so that a reader of one value (the
CLI finding its state directory) needs neither pydantic nor the models.
"""

from __future__ import annotations

from typing import Any

import yaml

from shared.settings._problems import ConfigError, ConfigProblem

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
