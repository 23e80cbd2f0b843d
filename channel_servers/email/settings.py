"""Settings of the email channel (environment variables ``NEXO_EMAIL_*``)."""

from __future__ import annotations

import ssl
from pathlib import Path
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
    """Default 993, or 143 with ``imap_security=starttls``."""
    imap_security: Security = "tls"
    """``tls`` (implicit TLS, port 993) or ``starttls`` (port 143); ``none`` only to a server on this
    machine (or with ``allow_plaintext_password``)."""
    ca_file: Path | None = None
    """A PEM file of the certificate authorities to trust for IMAP and SMTP (a server with a
    self-signed or private certificate); default the system's."""
    allow_plaintext_password: bool = False
    """Let ``none`` reach another machine, password and mail in clear. Only for a network you trust."""
    sent_folder: str = "Sent"
    """Where each reply is filed after it went out (created if missing); a restart looks here for
    replies whose send was interrupted."""
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

    @field_validator("ca_file")
    @classmethod
    def _ca_file(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        path = value.expanduser()
        try:
            ssl.create_default_context(cafile=str(path))
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(
                f"{str(value)!r} is not a readable PEM file of certificates ({exc}): give the CA "
                "certificate of your mail server, or leave the variable unset to trust the system's"
            ) from None
        return path

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
        if self.imap_security == "starttls" and "imap_port" not in self.model_fields_set:
            self.imap_port = 143
        for kind, host, security in (
            ("IMAP", self.imap_host, self.imap_security),
            ("SMTP", self.smtp_host, self.smtp_security),
        ):
            if security == "none" and not is_loopback(host) and not self.allow_plaintext_password:
                raise ValueError(
                    f"{kind} without TLS to {host} would send the password in clear: set "
                    f"NEXO_EMAIL_{kind}_SECURITY to tls or starttls (or, only on a network you trust, "
                    "NEXO_EMAIL_ALLOW_PLAINTEXT_PASSWORD=true)"
                )
        return self

    def tls_context(self) -> ssl.SSLContext:
        """The one TLS context of IMAP and SMTP: the system's authorities, or those of ``ca_file``."""
        return ssl.create_default_context(cafile=None if self.ca_file is None else str(self.ca_file))

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
