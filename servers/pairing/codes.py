"""Pairing codes: issuing them, the digest and sealed copy that are stored, and the reply carrying one.

Codes never reach the disk in plain text: each is stored as an HMAC-SHA256 (to match what the
operator types) and sealed with AES-GCM (to send the same code again to a sender who writes twice),
both under keys derived from the 32-byte ``code.key`` next to the database.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from servers.pairing.errors import SealBroken
from servers.pairing.limits import duration
from shared.protocol.identities import CODE_ALPHABET, CODE_LENGTH


class CodeBook:
    """Issues codes and turns them into what is stored: a digest to match and a sealed copy."""

    def __init__(self, key: bytes) -> None:
        self._digest_key = self._derive(key, b"nexo/pairing code digest")
        self._aead = AESGCM(self._derive(key, b"nexo/pairing code seal"))

    @staticmethod
    def _derive(key: bytes, purpose: bytes) -> bytes:
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(key)

    @staticmethod
    def new_code() -> str:
        return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))

    def digest(self, code: str) -> str:
        return hmac.new(self._digest_key, code.encode(), hashlib.sha256).hexdigest()

    def seal(self, code: str, pending_id: str) -> bytes:
        """Encrypted and bound to its request: a sealed code copied to another row does not open."""
        nonce = secrets.token_bytes(12)
        return nonce + self._aead.encrypt(nonce, code.encode(), pending_id.encode())

    def unseal(self, sealed: bytes, pending_id: str) -> str:
        try:
            return self._aead.decrypt(sealed[:12], sealed[12:], pending_id.encode()).decode()
        except InvalidTag as exc:
            raise SealBroken(
                f"the stored code of pending request {pending_id!r} does not decrypt with the current "
                "code.key (was the key file replaced?); deny the request so the sender gets a new code"
            ) from exc


def challenge_reply(code: str, ttl: timedelta) -> str:
    return (
        f"I only talk with people my operator has approved. Your pairing code is {code}. Give it to "
        f"the operator, who approves you with: nexo pair approve {code}. The code expires in "
        f"{duration(ttl)}."
    )
