"""One YAML configuration file, validated by pydantic models that forbid unknown keys.

Order of work: parse the YAML, replace `${VAR}`, `${VAR:-default}` and `${file:PATH}` references,
apply `NEXO_SECTION__KEY=value` environment overrides, validate. Every problem names the file, the key
path and the fix, and no message repeats a secret's value.
"""

from shared.settings._interpolate import interpolate
from shared.settings._load import load_config, parse_yaml
from shared.settings._overrides import apply_env_overrides, parse_env_value
from shared.settings._problems import ConfigError, ConfigProblem, format_key_path
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
