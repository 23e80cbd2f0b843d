"""Secrets recognised by their format rather than their issuer: PEM private keys and JWTs."""

from __future__ import annotations

from shared.secrets.rule import START, Rule, rule
from shared.secrets.validators import jwt_header, pem_body

_PEM_LABEL = r"[ A-Z0-9_\-]{0,100}PRIVATE KEY(?: BLOCK)?-----"

FORMAT_RULES: tuple[Rule, ...] = (
    rule(
        "private-key",
        "PEM private key block (RSA, EC, DSA, OpenSSH, PKCS#8, encrypted, PGP)",
        # A truncated block (no END line) is still a leaked key: it runs to the end of the text.
        r"-----BEGIN" + _PEM_LABEL + r"(?:(?!-----END" + _PEM_LABEL + r")[\s\S]){32,}?"
        r"(?:-----END" + _PEM_LABEL + r"|\Z)",
        ("private key",),
        pem_body,
    ),
    rule(
        "jwt",
        "JSON Web Token (base64url header.payload.signature with a JSON header)",
        START + r"eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]*",
        ("eyj",),
        jwt_header,
    ),
)
