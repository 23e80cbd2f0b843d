"""How to serve one server over Streamable HTTP: the bind, the token and the allowed hosts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mcp.server.transport_security import TransportSecuritySettings

from shared.hosting.errors import HostingError
from shared.hosting.tokens import default_token_path, generated_token, token_source
from shared.net import is_loopback


def parse_bind(value: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` (``[::1]:PORT`` for IPv6) as given to ``--http``."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit():
        raise HostingError(f"--http expects HOST:PORT, e.g. 127.0.0.1:8765; got {value!r}")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise HostingError(f"port {port} is out of range 0-65535 in {value!r}")
    return host.strip("[]") or "127.0.0.1", port


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """How to serve one server over Streamable HTTP."""

    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    allowed_hosts: Sequence[str] = ()
    """Extra ``Host`` header values to accept, e.g. ``memory:8765`` or ``memory:*`` for compose."""
    allowed_origins: Sequence[str] = ()
    max_request_bytes: int = 1024 * 1024

    def check(self) -> None:
        # Loopback is no boundary: every local user and every page a local browser opens can reach it.
        if not self.token:
            raise HostingError(
                f"refusing to serve over HTTP on {self.host}:{self.port} without a bearer token: "
                "set NEXO_SERVER_TOKEN, or NEXO_SERVER_TOKEN_FILE naming a 0600 file (created with a "
                "new token if it does not exist)"
            )

    def security(self) -> TransportSecuritySettings:
        hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
        origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
        if not is_loopback(self.host) and self.host not in ("0.0.0.0", "::"):  # noqa: S104
            hosts += [self.host, f"{self.host}:*"]
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[*hosts, *self.allowed_hosts],
            allowed_origins=[*origins, *self.allowed_origins],
        )


def http_options_from_env(bind: str, env: Mapping[str, str], name: str = "server") -> HttpOptions:
    """``--http HOST:PORT`` plus ``NEXO_SERVER_TOKEN`` / ``NEXO_SERVER_TOKEN_FILE`` and the allowlists.

    Tokens never come from the command line, where any local user could read them with ``ps``.
    Without either variable a token is generated once into ``<NEXO_STATE_DIR>/http-tokens/`` (see
    :func:`token_source`); a token file that does not exist yet is created the same way.
    """
    host, port = parse_bind(bind)
    token = env.get("NEXO_SERVER_TOKEN") or None
    if token is None:
        token = generated_token(token_source(env, name).path or default_token_path(name, env))

    def listed(name: str) -> tuple[str, ...]:
        return tuple(part.strip() for part in env.get(name, "").split(",") if part.strip())

    options = HttpOptions(
        host=host,
        port=port,
        token=token,
        allowed_hosts=listed("NEXO_SERVER_ALLOWED_HOSTS"),
        allowed_origins=listed("NEXO_SERVER_ALLOWED_ORIGINS"),
    )
    options.check()
    return options
