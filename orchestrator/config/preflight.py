"""What the machine must provide for a config to run: commands on PATH, provider keys."""

from __future__ import annotations

from orchestrator.config.nexo import NexoConfig
from orchestrator.mesh import StdioServerConfig
from shared.settings import ConfigProblem

ANTHROPIC_API = "https://api.anthropic.com"


def stdio_commands_missing(config: NexoConfig, file: str) -> list[ConfigProblem]:
    """Stdio servers whose command cannot be found: a config error, not a transient failure."""
    import shutil

    problems = []
    for name, server in config.servers.items():
        if isinstance(server, StdioServerConfig) and shutil.which(server.command) is None:
            problems.append(
                ConfigProblem(
                    file,
                    f"servers.{name}.command",
                    f"command {server.command!r} not found",
                    "install it or give its full path",
                )
            )
    return problems


def provider_keys_missing(config: NexoConfig, file: str) -> list[ConfigProblem]:
    """Agents whose provider is Anthropic's own API without a key: every turn would be refused, so
    the operator hears it at start and from --check-config rather than on the first message."""
    from orchestrator.llm.config import AnthropicProviderConfig

    problems = []
    for name, provider in sorted(config.llm.providers.items()):
        users = [agent.id for agent in config.agents if agent.model.provider == name]
        if not users or not isinstance(provider, AnthropicProviderConfig):
            continue
        if provider.base_url.rstrip("/") != ANTHROPIC_API:
            continue  # a proxy or gateway may hold the key itself
        if provider.api_key is not None and provider.api_key.get_secret_value().strip():
            continue
        problems.append(
            ConfigProblem(
                file,
                f"llm.providers.{name}.api_key",
                f"agent {', '.join(map(repr, users))} uses provider {name!r} (Anthropic at {ANTHROPIC_API}) "
                "but its api_key is empty",
                "export ANTHROPIC_API_KEY=... (the built-in defaults and config/agents.yaml read it), set "
                f"llm.providers.{name}.api_key, or choose another provider with NEXO_MODEL_PROVIDER",
            )
        )
    return problems
