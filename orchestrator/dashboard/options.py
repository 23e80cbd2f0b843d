"""The ``dashboard:`` config section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.net import is_loopback


class DashboardOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    port: int | None = Field(None, ge=0, le=65535)
    """Serve the dashboard at http://HOST:PORT/; null serves none (the built-in config sets 8780)."""
    host: str = "127.0.0.1"
    tls_terminated: bool = False
    """A reverse proxy in front terminates TLS: required for any non-loopback ``host``."""
    public_origin: str | None = Field(None, pattern=r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?$")
    """The https origin the proxy serves the dashboard at (with ``tls_terminated``)."""
    login_ttl_s: float = Field(120.0, gt=0, le=3600)
    """How long a one-time login link from ``nexo dashboard`` stays valid."""
    session_ttl_s: float = Field(12 * 3600.0, gt=0, le=30 * 86400)
    """How long a login lasts; every session also ends when ``nexo run`` restarts."""

    @model_validator(mode="after")
    def _bind_is_safe(self) -> DashboardOptions:
        if not is_loopback(self.host) and not self.tls_terminated:
            raise ValueError(
                f"the dashboard binds to loopback only, not {self.host!r}: put a reverse proxy that "
                "terminates TLS in front and set dashboard.tls_terminated: true and "
                "dashboard.public_origin: https://HOST, or use host: 127.0.0.1"
            )
        if self.tls_terminated and self.public_origin is None:
            raise ValueError(
                "dashboard.tls_terminated needs dashboard.public_origin (the https://HOST the proxy "
                "serves), so that requests naming another host or origin are refused"
            )
        return self
