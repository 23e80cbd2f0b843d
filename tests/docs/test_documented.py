"""Docs that cannot rot: every config key and every CLI command is documented."""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from orchestrator.cli.main import build_parser
from orchestrator.config.nexo import NexoConfig

REPO = Path(__file__).resolve().parents[2]


def _models(annotation: object) -> list[type[BaseModel]]:
    """BaseModel classes inside an annotation (through Optional, unions, lists and dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, dict) or origin is not None:
        for arg in typing.get_args(annotation):
            found.extend(_models(arg))
    return found


def _keys(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Documented key names: nested single models as ``parent.child``, containers restart the path."""
    for name, field in model.model_fields.items():
        nested = _models(field.annotation)
        origin = typing.get_origin(field.annotation)
        if nested and origin not in (list, dict):
            for sub in nested:
                yield from _keys(sub, f"{prefix}{name}.")
            continue
        yield f"{prefix}{name}"
        for sub in nested:
            yield from _keys(sub)


def test_every_config_key_appears_in_the_configuration_reference() -> None:
    text = (REPO / "docs" / "configuration.md").read_text()

    def documented(key: str) -> bool:
        # `budgets.max_turns` in a table, or a `supervision` section listing `max_backoff_s`.
        head, _, leaf = key.rpartition(".")
        return f"`{key}`" in text or (bool(head) and f"`{head}`" in text and f"`{leaf}`" in text)

    missing = sorted({key for key in _keys(NexoConfig) if not documented(key)})
    assert missing == [], f"document these keys in docs/configuration.md: {missing}"


def _commands(parser: argparse.ArgumentParser, prefix: str = "nexo") -> Iterator[str]:
    for action in parser._actions:  # argparse offers no public walk over subcommands
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}"
                yield from _commands(sub, f"{prefix} {name}")


def test_every_cli_command_is_documented() -> None:
    text = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
    missing = [command for command in _commands(build_parser()) if command not in text]
    assert missing == [], f"document these commands in README.md or docs/: {missing}"


def _undocumented_arguments(parser: argparse.ArgumentParser, prefix: str = "nexo") -> Iterator[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _undocumented_arguments(sub, f"{prefix} {name}")
        elif not isinstance(action, argparse._HelpAction) and not action.help:
            yield f"{prefix} {'/'.join(action.option_strings) or action.dest}"


def test_every_cli_argument_has_help_text() -> None:
    assert list(_undocumented_arguments(build_parser())) == []


def test_readme_exit_code_table_matches_the_codes_commands_return() -> None:
    from orchestrator.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, EXIT_WARN

    text = (REPO / "README.md").read_text()
    table = text[text.index("| Code | Meaning |") :].split("\n\n", 1)[0]
    documented = [int(line.split("|")[1]) for line in table.splitlines()[2:]]
    assert documented == [EXIT_OK, EXIT_FAIL, EXIT_WARN, EXIT_USAGE]
