"""One YAML configuration file, validated by pydantic models that forbid unknown keys.

Order of work: parse the YAML, replace `${VAR}`, `${VAR:-default}` and `${file:PATH}` references,
apply `NEXO_SECTION__KEY=value` environment overrides, validate. Every problem names the file, the key
path and the fix, and no message repeats a secret's value.

The validating half (`load_config`, `settings_error`) is imported on first use: a command that only
reads one value of the file (the CLI finding its state directory) does not pay for pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.settings._interpolate import interpolate
from shared.settings._overrides import apply_env_overrides, parse_env_value
from shared.settings._problems import ConfigError, ConfigProblem, format_key_path
from shared.settings._yaml import parse_yaml

if TYPE_CHECKING:
    from shared.settings._load import load_config
    from shared.settings._validation import settings_error

__all__ = [
    "ConfigError",
    "ConfigProblem",
    "apply_env_overrides",
    "format_key_path",
    "interpolate",
    "load_config",
    "parse_env_value",
    "parse_yaml",
    "settings_error",
]


def __getattr__(name: str) -> Any:
    if name == "load_config":
        from shared.settings._load import load_config

        return load_config
    if name == "settings_error":
        from shared.settings._validation import settings_error

        return settings_error
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
