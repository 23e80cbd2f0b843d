"""Check a model's tool arguments against the tool's input schema before anything else happens.

A call that cannot succeed is answered to the model at once, one short line per bad field, so the
operator is never asked to approve a call that would only fail validation on the server.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

    from orchestrator.mesh import CatalogTool

logger = logging.getLogger("nexo.loop")

GIVEN_PREVIEW_CHARS = 60


def argument_problems(tool: CatalogTool, arguments: Mapping[str, Any]) -> str | None:
    """None when ``arguments`` fit ``tool.input_schema``; otherwise the message for the model."""
    # jsonschema (with referencing and attrs, hundreds of ms to import) comes with the first tool
    # call, not with the daemon's start.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(tool.input_schema)
    except SchemaError as exc:
        # The server's own validation still runs; an unusable schema only loses the early answer.
        logger.warning(
            "%s publishes an invalid input schema (%s); not checked before the call",
            tool.qualified,
            exc.message,
        )
        return None
    validator = Draft202012Validator(tool.input_schema)
    errors = sorted(validator.iter_errors(dict(arguments)), key=lambda error: list(error.absolute_path))
    if not errors:
        return None
    lines = dict.fromkeys(line for error in errors for line in _describe(tool, error))
    return "\n".join([f"invalid arguments for {tool.qualified}:", *lines])


def _describe(tool: CatalogTool, error: ValidationError) -> list[str]:
    field = ".".join(str(part) for part in error.absolute_path) or "(arguments)"
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        takes = ", ".join(sorted(known)) or "no arguments"
        return [
            f"- {name}: not a parameter of {tool.qualified}; its parameters are: {takes}"
            for name in sorted(error.instance)
            if name not in known
        ]
    if error.validator == "required" and isinstance(error.instance, dict):
        required = error.validator_value if isinstance(error.validator_value, list) else []
        return [f"- {name}: required but missing" for name in required if name not in error.instance]
    return [f"- {field}: {_expectation(error)}; got {_preview(error.instance)}"]


def _expectation(error: ValidationError) -> str:
    rule, value = error.validator, error.validator_value
    wording = {
        "type": f"expected type {value}",
        "minimum": f"expected at least {value}",
        "maximum": f"expected at most {value}",
        "exclusiveMinimum": f"expected more than {value}",
        "exclusiveMaximum": f"expected less than {value}",
        "enum": f"expected one of {', '.join(map(repr, value)) if isinstance(value, list) else value}",
        "pattern": f"expected text matching {value!r}",
        "minLength": f"expected at least {value} characters",
        "maxLength": f"expected at most {value} characters",
    }
    return wording.get(str(rule), error.message)


def _preview(value: Any) -> str:
    text = repr(value)
    if len(text) > GIVEN_PREVIEW_CHARS:
        return text[: GIVEN_PREVIEW_CHARS - 1] + "…"
    return text
