"""Who is logged in: one-time login tokens and signed session cookies, keyed per daemon start.

A login token is handed out by ``nexo dashboard`` through the control socket (only the operator can
reach it), kept here as a SHA-256 digest, used once and short-lived. Redeeming one sets a session
cookie signed with a key made when the daemon starts: a restart logs every page out, and nothing
about sessions is written to disk. The CSRF token of a session is derived from it with the same key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "nexo_session"
MAX_OUTSTANDING_LOGINS = 32


@dataclass(frozen=True)
class Session:
    id: str
    operator: str
    expires_at: float


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Keyring:
    """The login tokens waiting to be used and the key sessions are signed with."""

    def __init__(
        self, *, login_ttl_s: float, session_ttl_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        self._key = secrets.token_bytes(32)
        self._logins: dict[str, tuple[float, str]] = {}
        self._ended: dict[str, float] = {}
        """Sessions logged out before they expire (id -> expiry): a copy of their cookie opens nothing."""
        self._login_ttl = login_ttl_s
        self.session_ttl_s = session_ttl_s
        self._clock = clock

    def mint_login(self, operator: str) -> str:
        """A new one-time token for ``operator``; only its digest is kept."""
        now = self._clock()
        self._logins = {d: v for d, v in self._logins.items() if v[0] > now}
        while len(self._logins) >= MAX_OUTSTANDING_LOGINS:
            del self._logins[next(iter(self._logins))]
        token = secrets.token_urlsafe(32)
        self._logins[_digest(token)] = (now + self._login_ttl, operator[:80] or "operator")
        return token

    def redeem(self, token: str) -> Session | None:
        """The session a login token opens, once: a used, unknown or expired token opens none."""
        found = self._logins.pop(_digest(token), None)
        if found is None or found[0] <= self._clock():
            return None
        return Session(secrets.token_urlsafe(16), found[1], self._clock() + self.session_ttl_s)

    def _mac(self, purpose: str, payload: str) -> str:
        return _b64(hmac.new(self._key, f"{purpose}:{payload}".encode(), hashlib.sha256).digest())

    def cookie_value(self, session: Session) -> str:
        payload = _b64(
            json.dumps({"id": session.id, "op": session.operator, "exp": session.expires_at}).encode()
        )
        return f"{payload}.{self._mac('session', payload)}"

    def session(self, cookie: str | None) -> Session | None:
        """The session a cookie carries when its signature holds and it has not expired."""
        if not cookie or cookie.count(".") != 1:
            return None
        payload, mac = cookie.split(".")
        if not hmac.compare_digest(mac, self._mac("session", payload)):
            return None
        try:
            data = json.loads(_unb64(payload))
            session = Session(str(data["id"]), str(data["op"]), float(data["exp"]))
        except (ValueError, KeyError, TypeError):
            return None
        if session.expires_at <= self._clock() or session.id in self._ended:
            return None
        return session

    def end(self, session: Session) -> None:
        """Log ``session`` out: its cookie, wherever a copy of it is, opens nothing any more."""
        now = self._clock()
        self._ended = {sid: expiry for sid, expiry in self._ended.items() if expiry > now}
        self._ended[session.id] = session.expires_at

    def csrf_token(self, session: Session) -> str:
        return self._mac("csrf", session.id)

    def csrf_ok(self, session: Session, token: object) -> bool:
        return isinstance(token, str) and hmac.compare_digest(token, self.csrf_token(session))
