"""Tool input schemas that forbid unknown properties, and validation errors a model can act on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from pydantic import ConfigDict, ValidationError

SCHEMA_KEYWORDS_WITH_SUBSCHEMAS = ("items", "additionalProperties", "not")
SCHEMA_KEYWORDS_WITH_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_KEYWORDS_WITH_SUBSCHEMA_MAPS = ("properties", "$defs")
GIVEN_PREVIEW_CHARS = 60


@dataclass(frozen=True, slots=True)
class StrictArguments:
    """A tool's argument model that refuses unknown fields, and the input schema published for it."""

    model: type[ArgModelBase]
    schema: dict[str, Any]


def strict_arguments(arguments: type[ArgModelBase], tool_name: str) -> StrictArguments:
    """Derive from the SDK's argument model one with ``extra="forbid"`` and a clean JSON schema.

    Pydantic's generated ``title`` keys ("Time Hhmm") are dropped: a client shows them, and the
    descriptions say what each parameter is.
    """
    config = ConfigDict(**{**arguments.model_config, "extra": "forbid"})
    strict: type[ArgModelBase] = type(
        f"{tool_name}_arguments", (arguments,), {"model_config": config, "__module__": arguments.__module__}
    )
    schema = strict.model_json_schema(by_alias=True)
    _drop_generated_titles(schema)
    return StrictArguments(strict, schema)


def _drop_generated_titles(schema: dict[str, Any]) -> None:
    if isinstance(schema.get("title"), str):
        del schema["title"]
    for keyword in SCHEMA_KEYWORDS_WITH_SUBSCHEMAS:
        child = schema.get(keyword)
        if isinstance(child, dict):
            _drop_generated_titles(child)
    for keyword in SCHEMA_KEYWORDS_WITH_SUBSCHEMA_LISTS:
        for child in schema.get(keyword, ()):
            if isinstance(child, dict):
                _drop_generated_titles(child)
    for keyword in SCHEMA_KEYWORDS_WITH_SUBSCHEMA_MAPS:
        for child in schema.get(keyword, {}).values():
            if isinstance(child, dict):
                _drop_generated_titles(child)


def describe_invalid_arguments(tool: str, error: ValidationError, parameters: list[str]) -> str:
    """One short line per bad field: its name, what was expected, what was given."""
    takes = ", ".join(parameters) if parameters else "no arguments"
    lines = [f"invalid arguments for {tool}:"]
    for problem in error.errors(include_url=False):
        field = ".".join(str(part) for part in problem["loc"]) or "(arguments)"
        kind = problem["type"]
        if kind == "extra_forbidden":
            lines.append(f"- {field}: not a parameter of {tool}; its parameters are: {takes}")
        elif kind == "missing":
            lines.append(f"- {field}: required but missing")
        else:
            lines.append(f"- {field}: {_expectation(problem['msg'])}; got {_preview(problem.get('input'))}")
    return "\n".join(lines)


def _expectation(message: str) -> str:
    if message.startswith("Input should be "):
        return "expected " + message.removeprefix("Input should be ")
    message = message.removeprefix("Value error, ")
    return message[:1].lower() + message[1:]


def _preview(value: Any) -> str:
    text = repr(value)
    if len(text) > GIVEN_PREVIEW_CHARS:
        return text[: GIVEN_PREVIEW_CHARS - 1] + "…"
    return text
