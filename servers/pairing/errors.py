"""What the pairing store refuses, as exception types the control plane maps to errors (no MCP imports)."""

from __future__ import annotations


class PairingError(Exception):
    """Base class; every message names the bad value and what to do instead."""


class InvalidRequest(PairingError, ValueError):
    """A value the caller can correct (an id that is not valid on its platform, a bad allow_from entry)."""


class CodeRefused(PairingError):
    """An approval code that is malformed, wrong, expired, used or denied (a failed attempt)."""


class PendingNotFound(PairingError, LookupError):
    """No open pending request has this id (unknown, or already approved, denied or expired)."""


class LockedOut(PairingError):
    """Too many failed approvals: every approval is refused until the lockout ends."""


class KeyFileError(PairingError):
    """The code key file cannot be created, read or trusted; the message names the file and the fix."""


class SealBroken(PairingError):
    """A stored code cannot be decrypted with the current key (the key file was replaced)."""
