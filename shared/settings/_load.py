"""Loading the one YAML configuration file into a pydantic model."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TypeVar

import pydantic
from pydantic import BaseModel

from shared.settings._interpolate import interpolate
from shared.settings._overrides import env_overrides
from shared.settings._problems import ConfigError, ConfigProblem
from shared.settings._validation import validation_problems
from shared.settings._yaml import parse_yaml

M = TypeVar("M", bound=BaseModel)

BUILT_IN = "<built-in defaults>"
ENV_PREFIX = "NEXO_"
ENV_DELIMITER = "__"


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
