"""One logged-in IMAP connection: implicit TLS, STARTTLS or (on this machine only) plain, then LOGIN.

aioimaplib knows the STARTTLS command but has no call for it, so the upgrade is done here: the
command on the plain connection, then the event loop wraps the same transport in TLS and the
capabilities are read again (RFC 3501 6.2.1: those before the upgrade no longer hold). A server
that offers no STARTTLS is refused, never answered in clear.
"""

from __future__ import annotations

import asyncio
import logging
import ssl

import aioimaplib
import anyio

from channel_servers.email.settings import EmailSettings
from shared.hosting.errors import HostingError

logger = logging.getLogger("nexo.email")


class ImapProblem(Exception):
    """The server refused a command; the connection is dropped and opened again."""


def checked(response: aioimaplib.Response, command: str) -> aioimaplib.Response:
    if response.result != "OK":
        detail = b" ".join(bytes(line) for line in response.lines[-1:]).decode(errors="replace")
        raise ImapProblem(f"IMAP {command} failed: {response.result} {detail}")
    return response


async def _starttls(client: aioimaplib.IMAP4, host: str, context: ssl.SSLContext) -> None:
    protocol = client.protocol
    if not client.has_capability("STARTTLS"):
        raise ImapProblem(
            f"the IMAP server {host} offers no STARTTLS, so the password would go in clear: set "
            "NEXO_EMAIL_IMAP_SECURITY=tls (port 993) if it has implicit TLS"
        )
    checked(
        await protocol.execute(aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)),
        "STARTTLS",
    )
    secured = await asyncio.get_running_loop().start_tls(
        protocol.transport, protocol, context, server_hostname=host
    )
    if secured is None:
        raise ImapProblem(f"the TLS handshake with {host} did not complete")
    protocol.transport = secured
    await asyncio.wait_for(protocol.capability(), client.timeout)


async def open_imap(settings: EmailSettings, context: ssl.SSLContext) -> aioimaplib.IMAP4:
    """A connection logged in as ``settings.login``; closed again when any step fails."""
    client: aioimaplib.IMAP4
    if settings.imap_security == "tls":
        client = aioimaplib.IMAP4_SSL(settings.imap_host, settings.imap_port, ssl_context=context)
    else:
        client = aioimaplib.IMAP4(settings.imap_host, settings.imap_port)
    try:
        await client.wait_hello_from_server()
        if settings.imap_security == "starttls":
            await _starttls(client, settings.imap_host, context)
        login = await client.login(settings.login, settings.password.get_secret_value())
        if login.result != "OK":
            raise HostingError(
                f"the IMAP server {settings.imap_host} refused the login of {settings.login}: check "
                "NEXO_EMAIL_USERNAME and NEXO_EMAIL_PASSWORD (many providers need an app password)"
            )
    except OSError:  # refused, reset, or a failed TLS handshake: no LOGOUT can get through
        _close(client)
        raise
    except BaseException:
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await quietly_logout(client)
        raise
    return client


def _close(client: aioimaplib.IMAP4) -> None:
    transport = getattr(client.protocol, "transport", None)
    if transport is not None:
        transport.close()


async def quietly_logout(client: aioimaplib.IMAP4) -> None:
    try:
        if client.has_pending_idle():
            client.idle_done()
        await client.logout()
    except (TimeoutError, OSError, aioimaplib.Abort, aioimaplib.CommandTimeout):
        logger.debug("IMAP logout failed; the connection is closed anyway")
    finally:
        _close(client)
