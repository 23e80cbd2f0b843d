"""Loading the config: the file or the built-in defaults, interpolated, overridden and cross-checked."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from orchestrator.config.nexo import NexoConfig
from orchestrator.config.references import reference_problems
from orchestrator.defaults import default_config_text
from orchestrator.mesh import HttpServerConfig
from orchestrator.mesh.token_origin import token_origin
from shared.settings import ConfigError, load_config, parse_yaml

RESERVED_ENV = ("CONFIG", "STATE_DIR", "PYTHON", "LOG_LEVEL")


def load(path: Path | None, env: Mapping[str, str] | None = None) -> NexoConfig:
    """Load ``path`` (or the built-in defaults) with interpolation and ``NEXO_*`` overrides."""
    environ = dict(os.environ if env is None else env)
    environ.setdefault("NEXO_PYTHON", sys.executable)
    # Only NEXO_<TOP-LEVEL KEY>... variables override the file; the rest (NEXO_MODEL_PROVIDER,
    # NEXO_CONSOLE_*, NEXO_SERVER_TOKEN, ...) are for interpolation and for the servers themselves.
    foreign = {
        name[5:].split("__")[0]
        for name in environ
        if name.startswith("NEXO_") and name[5:].split("__")[0].lower() not in NexoConfig.model_fields
    }
    config = load_config(
        NexoConfig,
        path,
        env=environ,
        default_text=None if path is not None else default_config_text(),
        reserved_env=(*RESERVED_ENV, *foreign),
    )
    file = str(path) if path is not None else "<built-in defaults>"
    problems = reference_problems(config, file)
    if problems:
        raise ConfigError(problems)
    _note_token_origins(config, path, file, environ)
    return config


def _note_token_origins(config: NexoConfig, path: Path | None, file: str, env: Mapping[str, str]) -> None:
    """Remember, per HTTP server, where its token came from: the file as written, before `${...}`."""
    written = parse_yaml(path.read_text(), file) if path is not None else {}
    servers = written.get("servers")
    for name, server in config.servers.items():
        if isinstance(server, HttpServerConfig):
            raw = servers.get(name) if isinstance(servers, dict) else None
            server.note_token_origin(token_origin(name, raw, file=file, env=env))
