"""``NexoConfig``: the whole config file, with its small sections (providers, secret guard, metrics)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from orchestrator.config.agents import AgentConfig
from orchestrator.config.channels import ChannelOptions, ChannelsOptions, OperatorOptions
from orchestrator.config.roles import AuditOptions, CronOptions, PairingOptions
from orchestrator.config.strict import StrictModel
from orchestrator.dashboard.options import DashboardOptions
from orchestrator.defaults import DEFAULT_STATE_DIR
from orchestrator.llm import ProviderConfig
from orchestrator.mesh import ServerConfig, StdioServerConfig, SupervisionConfig
from orchestrator.proactive import AutonomyConfig
from shared.net import is_loopback
from shared.secrets import RULE_IDS
from shared.settings import ConfigError, ConfigProblem


class LLMConfig(StrictModel):
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)


class SecretGuardOptions(StrictModel):
    outbound: Literal["redact", "block"] = "redact"
    """Secrets in text sent to anyone but the operator (replies to contacts, channel_send, notices to
    other chats): redact replaces each with [REDACTED:<rule id>], block withholds the text."""
    disabled_rules: list[str] = Field(default_factory=list)
    """Rule ids of docs/secret-guard.md that the outbound guard skips."""

    @field_validator("disabled_rules")
    @classmethod
    def _known_rules(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - RULE_IDS)
        if unknown:
            raise ValueError(
                f"unknown secret guard rule id(s) {', '.join(map(repr, unknown))}; use ids from the table "
                "in docs/secret-guard.md, e.g. github-pat or password-phrase"
            )
        return value


class MetricsOptions(StrictModel):
    port: int | None = Field(None, ge=0, le=65535)
    """Serve Prometheus metrics at http://HOST:PORT/metrics; null (the default) serves none."""
    host: str = "127.0.0.1"

    @field_validator("host")
    @classmethod
    def _loopback(cls, value: str) -> str:
        if not is_loopback(value):
            raise ValueError(
                f"metrics are served on loopback only, not {value!r}; use 127.0.0.1 or ::1 and "
                "let a local agent (or a reverse proxy with auth) expose them"
            )
        return value


class NexoConfig(StrictModel):
    state_dir: Path = DEFAULT_STATE_DIR
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    agents: list[AgentConfig] = Field(min_length=1)
    channel_options: dict[str, ChannelOptions] = Field(default_factory=dict)
    channels: ChannelsOptions = Field(default_factory=ChannelsOptions)
    operator: OperatorOptions = Field(default_factory=OperatorOptions)
    audit: AuditOptions = Field(default_factory=AuditOptions)
    autonomy: AutonomyConfig = Field(default_factory=AutonomyConfig)
    cron: CronOptions = Field(default_factory=CronOptions)
    pairing: PairingOptions = Field(default_factory=PairingOptions)
    metrics: MetricsOptions = Field(default_factory=MetricsOptions)
    dashboard: DashboardOptions = Field(default_factory=DashboardOptions)
    """The operator's web dashboard (docs/dashboard.md); off unless ``dashboard.port`` is set."""
    secret_guard: SecretGuardOptions = Field(default_factory=SecretGuardOptions)
    """What happens to secrets in text nexo sends to anyone but the operator (docs/secret-guard.md)."""
    log_format: Literal["text", "json"] = "text"
    """json: one JSON object per log line with agent, goal, server and tool as fields."""
    supervision: SupervisionConfig = Field(default_factory=SupervisionConfig)
    fork_server: bool = True
    """Fork built-in stdio servers from one preloaded template process (docs/configuration.md)."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    shutdown_drain_s: float = Field(20.0, ge=0, le=600)
    """On SIGTERM, how long the model and tool calls in flight get to finish (and their answers to be
    delivered and acknowledged) before what is left is cancelled."""

    @property
    def state_path(self) -> Path:
        return self.state_dir.expanduser()

    def channel(self, server: str) -> ChannelOptions:
        return self.channel_options.get(server, ChannelOptions())

    def agent(self, agent_id: str | None) -> AgentConfig:
        if agent_id is None:
            return self.agents[0]
        for agent in self.agents:
            if agent.id == agent_id:
                return agent
        known = ", ".join(a.id for a in self.agents)
        raise ConfigError(
            [ConfigProblem("--agent", "agents", f"no agent {agent_id!r}", f"use one of: {known}")]
        )


def workspace_root(config: NexoConfig) -> Path:
    """The agent's workspace directory, as the workspace server will resolve it."""
    server = config.servers.get("workspace")
    root = server.env.get("NEXO_WORKSPACE_ROOT") if isinstance(server, StdioServerConfig) else None
    return Path(root).expanduser() if root else config.state_path / "workspace"
