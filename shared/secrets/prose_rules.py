"""Credentials given in words: a password, a PIN or a code named in a sentence."""

from __future__ import annotations

from shared.secrets.rule import Rule, rule
from shared.secrets.validators import password_value

_PHRASE_ASSIGN = r"""(?:\s+(?:is|was|=|:)|\s*[:=])\s*["'`]?"""
"""Between a credential word and its value: "is", "was", ":" or "=" (a bare space is prose)."""
_NOT_A_SECRET_CODE = "".join(
    rf"(?<!{word} )"
    for word in (
        "zip", "postal", "post", "status", "exit", "error", "area", "country", "source", "return",
        "response", "http", "product", "dial", "airport", "tracking", "reference", "booking", "tax",
        "sort", "swift", "bank", "color", "colour", "promo", "discount", "coupon", "voucher", "dress",
        "region", "language", "currency", "item", "order", "article", "postcode", "station", "ZIP",
        "Zip", "Postal", "Status", "Exit", "Error", "Area", "Country", "HTTP", "Product", "Tracking",
        "Reference", "Booking", "Promo", "Discount", "Order", "Item",
    )
)  # fmt: skip
"""Codes that are labels, not secrets: a zip code, an HTTP status code, an exit code."""

PROSE_RULES: tuple[Rule, ...] = (
    rule(
        "password-phrase",
        "A password, passphrase or passcode given in words (my password is ..., Password: ...)",
        r"(?i:\b(?:password|passwd|passphrase|passcode|pwd)\b)"
        + _PHRASE_ASSIGN
        + r"""(?P<secret>[^\s"'`]{3,127}[^\s"'`.,;:!?)\]])""",
        ("pass", "pwd"),
        password_value,
    ),
    rule(
        "pin-phrase",
        "A PIN given in words (PIN: 1234, my pin code is 4711)",
        r"(?i:\bpin(?:\s+(?:code|number))?\b)" + _PHRASE_ASSIGN + r"(?P<secret>\d{4,12})(?![\d\w])",
        ("pin",),
    ),
    rule(
        "code-phrase",
        "An access, door, login or one-time code given in words (the code is 4711, door code: 12-34)",
        _NOT_A_SECRET_CODE
        + r"(?i:\bcode\b)"
        + _PHRASE_ASSIGN
        + r"(?P<secret>\d(?:[ \-]?\d){3,11})(?![\d\w])",
        ("code",),
    ),
)
