"""Settings of the email channel (environment variables ``NEXO_EMAIL_*``)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from shared.channelkit import ChannelSettings
from shared.channelkit.settings import describe_problems
from shared.net import is_loopback

NAME = "email"
Security = Literal["tls", "starttls", "none"]


class EmailSettings(ChannelSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_EMAIL_", extra="forbid")

    address: str
    """The agent's own address: replies come from it, and mail from it is never answered."""
    username: str | None = None
    """The IMAP and SMTP login; default ``address``."""
    password: SecretStr
    """The mailbox's (app) password. In the config pass it as ``${file:PATH}`` or ``${VAR}``; never logged."""
    imap_host: str
    imap_port: int = Field(993, ge=1, le=65535)
    imap_security: Literal["tls", "none"] = "tls"
    """``tls`` (port 993); ``none`` only to a server on this machine."""
    folder: str = "INBOX"
    poll_interval_s: float = Field(60.0, gt=0, le=3600)
    """How often to look for new mail when the server offers no IDLE (with IDLE: how often to renew it)."""
    smtp_host: str
    smtp_port: int = Field(587, ge=1, le=65535)
    smtp_security: Security = "starttls"
    """``starttls`` (port 587) or ``tls`` (port 465); ``none`` only to a server on this machine."""
    authentication: Literal["dmarc", "off"] = "dmarc"
    """``dmarc``: mail counts as from its From address only when the receiving server's own
    Authentication-Results shows DMARC, or DKIM aligned with the From domain, passing; other mail is
    dropped before the model. ``off`` trusts every From line (only for a mailbox nobody else can
    write to)."""
    trusted_authserv_id: str | None = None
    """The authserv-id your receiving server writes in Authentication-Results (e.g. ``mx.google.com``)."""
    approvers: list[str] = Field(default_factory=list)
    """Addresses that get permission prompts by mail and may answer ``yes <id>`` / ``no <id>``."""
    reconnect_s: float = Field(5.0, gt=0, le=600)
    """How long to wait before reconnecting after the IMAP connection failed."""

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        local, at, domain = value.strip().rpartition("@")
        if not (local and at and "." in domain):
            raise ValueError(
                f"{value!r} is not an email address: give the agent's own, like agent@example.org"
            )
        return value.strip().lower()

    @field_validator("approvers")
    @classmethod
    def _approvers(cls, value: list[str]) -> list[str]:
        return [cls._address(address) for address in value]

    @model_validator(mode="after")
    def _safe(self) -> Self:
        if self.authentication == "dmarc" and not self.trusted_authserv_id:
            raise ValueError(
                "NEXO_EMAIL_TRUSTED_AUTHSERV_ID is not set: name the authserv-id your receiving server "
                "writes in Authentication-Results (see docs/channels/email.md), or set "
                "NEXO_EMAIL_AUTHENTICATION=off for a mailbox nobody else can write to"
            )
        for kind, host, security in (
            ("IMAP", self.imap_host, self.imap_security),
            ("SMTP", self.smtp_host, self.smtp_security),
        ):
            if security == "none" and not is_loopback(host):
                raise ValueError(
                    f"{kind} without TLS to {host} would send the password in clear: set "
                    f"NEXO_EMAIL_{kind}_SECURITY to tls (or starttls for SMTP)"
                )
        return self

    @property
    def login(self) -> str:
        return self.username or self.address


class SettingsError(ValueError):
    """The environment does not configure the channel; one line naming the variable and the fix."""


def load_settings() -> EmailSettings:
    try:
        return EmailSettings()
    except ValidationError as exc:
        raise SettingsError(describe_problems(exc, "NEXO_EMAIL_")) from None
