"""The loop checks a tool call's arguments against the tool's input schema before the gate asks."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.loop.arguments import argument_problems
from orchestrator.mesh import CatalogTool

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "text": {"type": "string", "description": "The note."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "At most this many."},
        "mode": {"type": "string", "enum": ["fast", "slow"], "description": "How."},
    },
    "required": ["text"],
}


def tool(schema: dict[str, Any] = SCHEMA) -> CatalogTool:
    return CatalogTool(
        server="notes",
        name="write_note",
        qualified="notes__write_note",
        description="Write a note.",
        input_schema=schema,
        read_only=False,
        destructive=False,
    )


def test_arguments_that_fit_the_schema_have_no_problems() -> None:
    assert argument_problems(tool(), {"text": "buy milk", "limit": 3, "mode": "fast"}) is None


@pytest.mark.parametrize(
    ("arguments", "lines"),
    [
        (
            {"txt": "buy milk"},
            [
                "- txt: not a parameter of notes__write_note; its parameters are: limit, mode, text",
                "- text: required but missing",
            ],
        ),
        ({"text": "x", "limit": 0}, ["- limit: expected at least 1; got 0"]),
        ({"text": "x", "limit": "3"}, ["- limit: expected type integer; got '3'"]),
        ({"text": "x", "mode": "medium"}, ["- mode: expected one of 'fast', 'slow'; got 'medium'"]),
    ],
)
def test_each_bad_field_is_one_line_naming_what_was_expected_and_given(
    arguments: dict[str, Any], lines: list[str]
) -> None:
    problems = argument_problems(tool(), arguments)
    assert problems is not None
    assert sorted(problems.splitlines()) == sorted(["invalid arguments for notes__write_note:", *lines])


def test_an_unusable_schema_is_left_to_the_server() -> None:
    assert argument_problems(tool({"type": "no-such-type"}), {"anything": 1}) is None
