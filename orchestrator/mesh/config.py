"""The ``servers:`` entries of the orchestrator's config."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr

Protocol = Literal["auto", "legacy"]


class _Server(BaseModel):
    model_config = ConfigDict(extra="forbid")

    protocol: Protocol = "auto"
    """``auto`` probes the 2026-07-28 discovery and falls back to the initialize handshake."""
    call_timeout_s: float = Field(60.0, gt=0)
    connect_wait_s: float = Field(15.0, ge=0)
    """How long a tool call waits for a restarting server before it fails."""


class StdioServerConfig(_Server):
    transport: Literal["stdio"]
    command: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None

    def describe(self) -> str:
        return " ".join([self.command, *self.args])


class HttpServerConfig(_Server):
    transport: Literal["http"]
    url: str = Field(pattern=r"^https?://")
    token: SecretStr | None = None
    _token_origin: str | None = PrivateAttr(None)

    def describe(self) -> str:
        return self.url

    @property
    def token_origin(self) -> str:
        """Where the token came from, for messages (never the token itself)."""
        return self._token_origin or "the config key `token` of this server"

    def note_token_origin(self, origin: str) -> None:
        self._token_origin = origin


ServerConfig = Annotated[StdioServerConfig | HttpServerConfig, Field(discriminator="transport")]


class SupervisionConfig(BaseModel):
    """Restart backoff and the per-server circuit breaker."""

    model_config = ConfigDict(extra="forbid")

    initial_backoff_s: float = Field(0.25, gt=0)
    max_backoff_s: float = Field(30.0, gt=0)
    http_max_backoff_s: float = Field(2.0, gt=0)
    """The longest wait between reconnects to a server over HTTP (its breaker never opens)."""
    jitter: float = Field(0.2, ge=0, le=1)
    failure_threshold: int = Field(5, ge=1)
    """Consecutive failed connects (or crashes within ``stable_after_s``) that open the breaker."""
    open_cooldown_s: float = Field(60.0, gt=0)
    """How long an open breaker waits before one half-open trial connect."""
    stable_after_s: float = Field(30.0, gt=0)
    """A connection that lived this long resets the failure count."""
    health_interval_s: float = Field(15.0, gt=0)
    """Ping period that notices a dead HTTP server between calls."""
    storage_check_s: float = Field(30.0, gt=0)
    """How often each server is asked whether its disk is full (``nexo status`` shows it)."""
