"""Whether a mail is really from its From address, as the receiving server's Authentication-Results says.

Only the topmost Authentication-Results header counts, and only when it carries the authserv-id of
the receiving server: it is the one that server added last. Any header below it could have come
with the mail from the sender. A mail passes when that header shows ``dmarc=pass`` for the From
domain, or ``dkim=pass`` for a signing domain aligned with it (the same domain or a parent of it).
"""

from __future__ import annotations

import re
from email.message import Message
from email.utils import getaddresses

_COMMENT = re.compile(r"\([^()]*\)")
_RESULT = re.compile(r"^\s*([a-z0-9_-]+)\s*=\s*([a-z]+)", re.IGNORECASE)
_PROPERTY = re.compile(r"\b([a-z]+\.[a-z-]+)\s*=\s*(\S+)", re.IGNORECASE)


def from_domain(message: Message) -> str | None:
    """The From address's domain, or None when From is not exactly one address."""
    addresses = [address for _, address in getaddresses(message.get_all("From", [])) if address]
    if len(addresses) != 1:
        return None
    local, _, domain = addresses[0].rpartition("@")
    return domain.lower().rstrip(".") if local and domain else None


def _aligned(signing: str, author: str) -> bool:
    signing = signing.lower().lstrip("@").rstrip(".")
    return author == signing or author.endswith("." + signing)


def authenticated(message: Message, trusted_authserv_id: str) -> bool:
    author = from_domain(message)
    headers = message.get_all("Authentication-Results") or []
    if author is None or not headers:
        return False
    text = _COMMENT.sub("", " ".join(str(headers[0]).split()))
    authserv, *results = text.split(";")
    words = authserv.split()
    if not words or words[0].lower() != trusted_authserv_id.lower():
        return False
    for result in results:
        match = _RESULT.match(result)
        if match is None or match.group(2).lower() != "pass":
            continue
        properties = {key.lower(): value for key, value in _PROPERTY.findall(result)}
        method = match.group(1).lower()
        if method == "dmarc" and properties.get("header.from", author).lower().rstrip(".") == author:
            return True
        signer = properties.get("header.d") or properties.get("header.i", "").rpartition("@")[2]
        if method == "dkim" and signer and _aligned(signer, author):
            return True
    return False
