"""Signature schemes: each checks the raw request bytes, before anything parses them.

Every comparison of a presented value with an expected one goes through ``hmac.compare_digest`` on
bytes, so timing reveals nothing about how much of a guess was right. A refusal says only what the
sender can fix without helping an attacker: which header is missing or malformed, "signature
mismatch", or that the timestamp is outside the replay window.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

Scheme = Literal["hmac-sha256", "hmac-sha1", "token", "github", "stripe", "slack", "standard-webhooks"]
SCHEMES: tuple[Scheme, ...] = (
    "hmac-sha256",
    "hmac-sha1",
    "token",
    "github",
    "stripe",
    "slack",
    "standard-webhooks",
)
CONFIGURABLE_HEADER: frozenset[Scheme] = frozenset({"hmac-sha256", "hmac-sha1", "token"})
"""Schemes whose signature header (and its prefix) the source configures."""
BODY_ONLY: frozenset[Scheme] = frozenset({"github", "hmac-sha256", "hmac-sha1"})
"""Schemes that sign the body alone (no timestamp, no id): the same body again is a replay."""
STANDARD_SECRET_PREFIX = "whsec_"  # noqa: S105 -- the prefix of the format, not a secret

Headers = Mapping[str, str]
"""Looked up by lower-case name: a starlette ``Headers`` or a dict with lower-case keys."""


class Refused(Exception):
    """The request is not accepted; ``status`` and ``message`` are what the sender is told."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def mismatch() -> Refused:
    return Refused(401, "signature mismatch")


def missing(header: str) -> Refused:
    return Refused(401, f"missing header {header}")


def malformed(header: str) -> Refused:
    return Refused(401, f"malformed header {header}")


def outside_window() -> Refused:
    return Refused(400, "timestamp outside the replay window")


@dataclass(frozen=True, slots=True)
class Verified:
    """What a passed check learned: the signed timestamp, and an id when the source names none."""

    timestamp: int | None = None
    fallback_id: str | None = None


class Verifier(Protocol):
    def verify(self, headers: Headers, body: bytes, now: float) -> Verified:
        """Return what was verified, or raise :class:`Refused`."""
        ...


def _header(headers: Headers, name: str) -> str:
    value = headers.get(name.lower())
    if value is None or not value.strip():
        raise missing(name)
    return value.strip()


def _same(presented: str, expected: str) -> bool:
    return hmac.compare_digest(presented.encode(), expected.encode())


def _timestamp(value: str, header: str) -> int:
    if not value.isascii() or not value.isdigit():
        raise malformed(header)
    return int(value)


def _within(timestamp: int, now: float, window_s: int) -> None:
    if abs(now - timestamp) > window_s:
        raise outside_window()


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True, slots=True)
class GitHubVerifier:
    """``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>``; no timestamp is signed."""

    secret: bytes
    header: str = "X-Hub-Signature-256"

    def verify(self, headers: Headers, body: bytes, now: float) -> Verified:
        presented = _header(headers, self.header)
        expected = "sha256=" + hmac.new(self.secret, body, hashlib.sha256).hexdigest()
        if not _same(presented, expected):
            raise mismatch()
        return Verified()


@dataclass(frozen=True, slots=True)
class HmacVerifier:
    """An HMAC of the body, hex or base64, in a configured header after an optional prefix."""

    secret: bytes
    algorithm: Literal["sha256", "sha1"]
    header: str
    prefix: str = ""

    def verify(self, headers: Headers, body: bytes, now: float) -> Verified:
        presented = _header(headers, self.header)
        if not presented.startswith(self.prefix):
            raise mismatch()
        candidate = presented[len(self.prefix) :].strip()
        digest = hmac.new(self.secret, body, self.algorithm).digest()
        # Both encodings are compared in full (no short-circuit), whichever the sender used.
        as_hex = _same(candidate.lower(), digest.hex())
        as_base64 = _same(candidate, base64.b64encode(digest).decode())
        if not (as_hex | as_base64):
            raise mismatch()
        return Verified(fallback_id=body_digest(body))


@dataclass(frozen=True, slots=True)
class TokenVerifier:
    """A shared token: ``Authorization: Bearer <token>``, or a configured header after its prefix."""

    secret: bytes
    header: str | None = None
    prefix: str = ""

    def verify(self, headers: Headers, body: bytes, now: float) -> Verified:
        if self.header is None:
            scheme, _, presented = _header(headers, "Authorization").partition(" ")
            if scheme.lower() != "bearer":
                raise mismatch()
        else:
            value = _header(headers, self.header)
            if not value.startswith(self.prefix):
                raise mismatch()
            presented = value[len(self.prefix) :]
        if not hmac.compare_digest(presented.strip().encode(), self.secret):
            raise mismatch()
        return Verified(fallback_id=body_digest(body))


@dataclass(frozen=True, slots=True)
class StripeVerifier:
    """``Stripe-Signature: t=<ts>,v1=<hex>[,v1=...]`` over ``"{t}.{body}"``; any v1 may match."""

    secret: bytes
    window_s: int
    header: str = "Stripe-Signature"

    def verify(self, headers: Headers, body: bytes, now: float) -> Verified:
        stamps: list[str] = []
        signatures: list[str] = []
        for item in _header(headers, self.header).split(","):
            key, _, value = item.strip().partition("=")
            if key == "t":
                stamps.append(value)
            elif key == "v1":
                signatures.append(value)
        if len(stamps) != 1:
            raise malformed(self.header)
        timestamp = _timestamp(stamps[0], self.header)
        signed = stamps[0].encode() + b"." + body
        expected = hmac.new(self.secret, signed, hashlib.sha256).hexdigest()
        if not any([_same(signature, expected) for signature in signatures]):  # noqa: C419 -- compare all
            raise mismatch()
        _within(timestamp, now, self.window_s)
        return Verified(timestamp=timestamp)


@dataclass(frozen=True, slots=True)
class SlackVerifier:
    """``X-Slack-Signature: v0=<hex>`` over ``"v0:{X-Slack-Request-Timestamp}:{body}"``."""

    secret: bytes
    window_s: int
    signature_header: str = "X-Slack-Signature"
    timestamp_header: str = "X-Slack-Request-Timestamp"

    def verify(self, headers: Headers, body: bytes, now: float) -> Verified:
        stamp = _header(headers, self.timestamp_header)
        presented = _header(headers, self.signature_header)
        timestamp = _timestamp(stamp, self.timestamp_header)
        signed = b"v0:" + stamp.encode() + b":" + body
        expected = "v0=" + hmac.new(self.secret, signed, hashlib.sha256).hexdigest()
        if not _same(presented, expected):
            raise mismatch()
        _within(timestamp, now, self.window_s)
        # Slash commands and interactions carry no event id; the signed pair identifies the request.
        return Verified(timestamp=timestamp, fallback_id=body_digest(f"{stamp}:{presented}".encode())[:40])


def standard_webhooks_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret ``whsec_<base64>``."""
    if not secret.startswith(STANDARD_SECRET_PREFIX):
        raise ValueError(f"a Standard Webhooks secret starts with {STANDARD_SECRET_PREFIX!r}")
    try:
        key = base64.b64decode(secret[len(STANDARD_SECRET_PREFIX) :], validate=True)
    except binascii.Error:
        raise ValueError(f"a Standard Webhooks secret is {STANDARD_SECRET_PREFIX!r} then base64") from None
    if not key:
        raise ValueError(f"a Standard Webhooks secret has key bytes after {STANDARD_SECRET_PREFIX!r}")
    return key


@dataclass(frozen=True, slots=True)
class StandardWebhooksVerifier:
    """``webhook-signature: v1,<base64> ...`` over ``"{webhook-id}.{webhook-timestamp}.{body}"``."""

    key: bytes
    window_s: int

    def verify(self, headers: Headers, body: bytes, now: float) -> Verified:
        message_id = _header(headers, "webhook-id")
        stamp = _header(headers, "webhook-timestamp")
        presented = _header(headers, "webhook-signature")
        timestamp = _timestamp(stamp, "webhook-timestamp")
        signed = f"{message_id}.{stamp}.".encode() + body
        expected = base64.b64encode(hmac.new(self.key, signed, hashlib.sha256).digest()).decode()
        matches = [
            _same(value, expected)
            for version, _, value in (entry.partition(",") for entry in presented.split())
            if version == "v1"
        ]
        if not any(matches):
            raise mismatch()
        _within(timestamp, now, self.window_s)
        return Verified(timestamp=timestamp, fallback_id=message_id)


def make_verifier(
    scheme: Scheme, secret: str, *, window_s: int, header: str | None = None, prefix: str = ""
) -> Verifier:
    """The verifier of ``scheme``; ``ValueError`` when the secret cannot serve it."""
    key = secret.encode()
    if scheme == "github":
        return GitHubVerifier(key)
    if scheme == "stripe":
        return StripeVerifier(key, window_s)
    if scheme == "slack":
        return SlackVerifier(key, window_s)
    if scheme == "standard-webhooks":
        return StandardWebhooksVerifier(standard_webhooks_key(secret), window_s)
    if scheme == "token":
        return TokenVerifier(key, header, prefix)
    if header is None:
        raise ValueError(f"{scheme} needs signature_header")
    return HmacVerifier(key, "sha256" if scheme == "hmac-sha256" else "sha1", header, prefix)
