"""Checks that reject a pattern's match when its content cannot be the secret."""

from __future__ import annotations

import base64
import binascii
import json
import re


def mixed_case_not_hex(value: str) -> bool:
    """40 base64 characters from a key generator, not a git SHA or a word."""
    return (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and not re.fullmatch(r"[0-9a-fA-F]+", value)
    )


def jwt_header(value: str) -> bool:
    """The first segment decodes to a JSON object naming its algorithm, as every JWS header does."""
    segment = value.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (binascii.Error, ValueError):
        return False
    return isinstance(header, dict) and "alg" in header


def pem_body(value: str) -> bool:
    """A real key block carries base64 lines; prose that merely names the header does not."""
    return re.search(r"[A-Za-z0-9+/]{40,}", value) is not None


_NOT_PASSWORDS = frozenset(
    (
        "stored", "saved", "kept", "set", "not", "the", "in", "required", "needed", "correct",
        "wrong", "incorrect", "invalid", "expired", "missing", "empty", "changed", "reset", "too",
        "now", "still", "also", "hidden", "masked", "redacted", "unknown", "secret", "none", "null",
        "optional", "protected", "encrypted", "hashed", "rotated", "updated", "different", "same",
        "weak", "strong", "long", "short", "ok", "fine", "good", "bad", "there", "here", "below",
        "above", "attached", "managed", "generated",
    )
)  # fmt: skip


def password_value(value: str) -> bool:
    """A value, not a word of the sentence around it or a placeholder for one."""
    lowered = value.lower()
    if lowered in _NOT_PASSWORDS or lowered.strip("*•x.") == "":
        return False
    if value[0] in "$<{%[(" or value.startswith("REDACTED") or "[REDACTED:" in value:
        return False
    return not (value.isalpha() and value.islower() and len(value) <= 5)
