"""Platform ids and pairing codes in their one canonical spelling.

Identity matching is exact after :func:`normalize_sender`, which is ASCII-only on purpose: Unicode
folding (NFKC and the like) would make a fullwidth or look-alike id equal to an allowed one, so any
character outside printable ASCII is refused instead. Display names are never used for matching.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
"""Upper-case letters and digits without the look-alikes I, O, 0 and 1."""
CODE_LENGTH = 8
MAX_ID_LENGTH = 256


class InvalidSender(ValueError):
    """A platform id that cannot be matched safely; the message names the problem and the fix."""


class InvalidCode(ValueError):
    """An approval code that is not CODE_LENGTH characters of CODE_ALPHABET."""


_GENERIC = re.compile(r"[A-Za-z0-9._:@+-]{1,256}")
_TELEGRAM = re.compile(r"-?[1-9][0-9]{0,19}")
_SLACK_USER = re.compile(r"[UTW][A-Z0-9]{2,}")
_SLACK_CHAT = re.compile(r"[CDG][A-Z0-9]{2,}")
_DISCORD = re.compile(r"[0-9]{15,22}")
_PHONE = re.compile(r"[0-9]{6,15}")
_WHATSAPP_GROUP = re.compile(r"[0-9]{6,32}(-[0-9]{6,16})?@g\.us")
_EMAIL_LOCAL = re.compile(r"[a-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}")
_EMAIL_DOMAIN = re.compile(r"([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_WHATSAPP_USER_SUFFIXES = ("@s.whatsapp.net", "@c.us")
_ASCII_WHITESPACE = " \t\r\n\f\v"


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= 60 else raw[:57] + "...")


def _ascii_id(raw: str, what: str) -> str:
    text = raw.strip(_ASCII_WHITESPACE)
    if not text:
        raise InvalidSender(f"{what} is empty: pass the platform's id of the {what.split()[0]}")
    if text != raw:
        # "owner1 " is not the owner: a platform that sends padding sends another id, so it is refused
        # instead of being trimmed into a match.
        raise InvalidSender(
            f"{what} {_shown(raw)} has leading or trailing whitespace: ids are matched exactly, so "
            f"pass {_shown(text)} without the surrounding spaces (check the channel server or the "
            "config entry that produced it)"
        )
    if len(text) > MAX_ID_LENGTH:
        raise InvalidSender(f"{what} {_shown(text)} is {len(text)} characters long; ids have at most 256")
    for index, char in enumerate(text):
        if not " " <= char <= "~":
            name = unicodedata.name(char, "a control character")
            raise InvalidSender(
                f"{what} {_shown(text)} contains U+{ord(char):04X} ({name}) at position {index}: ids "
                "must be printable ASCII, so look-alike, fullwidth and invisible characters are refused; "
                "use the platform's own id exactly as the platform sends it"
            )
    return text


def _telegram(text: str, what: str) -> str:
    if text.startswith("@"):
        raise InvalidSender(
            f"{what} {_shown(text)} is a Telegram username: usernames change and can be taken over by "
            "someone else, so pairing uses the numeric id (e.g. 123456789); find it in the message's "
            "from.id"
        )
    if not _TELEGRAM.fullmatch(text):
        raise InvalidSender(
            f"{what} {_shown(text)} is not a Telegram id: use the numeric id (digits, a leading '-' for "
            "groups, no leading zeros), e.g. 123456789 or -1001234567890"
        )
    return text


def _slack(text: str, what: str, *, chat: bool) -> str:
    upper = text.upper()
    if _SLACK_USER.fullmatch(upper) or (chat and _SLACK_CHAT.fullmatch(upper)):
        return upper
    expected = "a conversation id (C..., G..., D...) or a user id" if chat else "a user id"
    raise InvalidSender(
        f"{what} {_shown(text)} is not a Slack id: use {expected} (U..., W... or T... followed by "
        "letters and digits), e.g. U024BE7LH; display names and @handles are not ids"
    )


def _whatsapp(text: str, what: str) -> str:
    lowered = text.lower()
    if lowered.endswith("@g.us"):
        if _WHATSAPP_GROUP.fullmatch(lowered):
            return lowered
        raise InvalidSender(
            f"{what} {_shown(text)} is not a WhatsApp group JID: expected digits followed by @g.us, "
            "e.g. 120363012345678901@g.us"
        )
    for suffix in _WHATSAPP_USER_SUFFIXES:
        if lowered.endswith(suffix):
            text = text[: -len(suffix)]
            break
    number = text[1:] if text.startswith("+") else text
    digits = re.sub(r"[ ()-]", "", number)
    if not _PHONE.fullmatch(digits):
        raise InvalidSender(
            f"{what} {_shown(text)} is not a WhatsApp number: use the E.164 number (6-15 digits, an "
            "optional leading '+', spaces and dashes allowed), e.g. +15551234567 or "
            "15551234567@s.whatsapp.net"
        )
    return digits


def _email(text: str, what: str) -> str:
    lowered = text.lower()
    local, at, domain = lowered.partition("@")
    if (
        not at
        or "@" in domain
        or not _EMAIL_LOCAL.fullmatch(local)
        or local.startswith(".")
        or local.endswith(".")
        or ".." in local
        or not _EMAIL_DOMAIN.fullmatch(domain)
    ):
        raise InvalidSender(
            f"{what} {_shown(text)} is not an email address: use the bare address with exactly one '@' "
            "and a dotted domain, e.g. alice@example.org (no display name, no angle brackets)"
        )
    return lowered


def _discord(text: str, what: str) -> str:
    if not _DISCORD.fullmatch(text):
        raise InvalidSender(
            f"{what} {_shown(text)} is not a Discord id: use the numeric snowflake (15-22 digits), "
            "e.g. 80351110224678912, not a username or a <@mention>"
        )
    return text


def _generic(text: str, what: str) -> str:
    if not _GENERIC.fullmatch(text):
        raise InvalidSender(
            f"{what} {_shown(text)} has characters ids may not contain: use letters, digits and "
            "._:@+- only (no spaces)"
        )
    return text


def _normalize(platform: str, raw: str, *, chat: bool) -> str:
    what = "chat id" if chat else "sender id"
    kind = platform.strip(_ASCII_WHITESPACE).lower()
    canonical = _canonical(kind, _ascii_id(raw, what), what, chat=chat)
    # Pairing stores the canonical form and the gate compares canonical forms: an id whose canonical
    # form would canonicalise to something else again could match two different stored ids.
    if _canonical(kind, canonical, what, chat=chat) != canonical:
        raise InvalidSender(
            f"{what} {_shown(raw)} does not keep one spelling ({_shown(canonical)} would change again); "
            "use the platform's own id exactly as the platform sends it"
        )
    return canonical


def _canonical(kind: str, text: str, what: str, *, chat: bool) -> str:
    if kind == "telegram":
        return _telegram(text, what)
    if kind == "slack":
        return _slack(text, what, chat=chat)
    if kind == "whatsapp":
        return _whatsapp(text, what)
    if kind == "email":
        return _email(text, what)
    if kind == "discord":
        return _discord(text, what)
    return _generic(text, what)


def normalize_sender(platform: str, raw: str) -> str:
    """The one spelling of a sender id on ``platform``; raises InvalidSender naming the problem.

    Platforms: telegram, slack, whatsapp, email, discord; any other name (generic, console, webhook,
    ...) keeps the id case-sensitive and allows ``[A-Za-z0-9._:@+-]``.
    """
    return _normalize(platform, raw, chat=False)


def listed_owner(
    platform: str, sender: str, allow_from: Iterable[str], *, scope: str, dm_policy: str
) -> bool:
    """Whether a message is the operator's own by the config: a direct message (``scope`` ``dm``), on
    a channel whose DM policy is not ``disabled``, from one of the ``allow_from`` ids. Such a sender
    is an owner whatever the pairing database says. The one rule for the pairing server and the
    orchestrator, which admits such a sender without asking the server. Raises InvalidSender for an
    id not valid on ``platform``."""
    if scope != "dm" or dm_policy == "disabled":
        return False
    normal = normalize_sender(platform, sender)
    return any(normalize_sender(platform, entry) == normal for entry in allow_from)


def normalize_chat(platform: str, raw: str) -> str:
    """The one spelling of a group chat id: the sender rules, plus Slack conversation ids (C, G, D)."""
    return _normalize(platform, raw, chat=True)


def normalize_code(raw: str) -> str:
    """An approval code as typed (any case, spaces and dashes) in its stored form; raises InvalidCode."""
    code = re.sub(r"[\s-]", "", raw).upper()
    if len(code) != CODE_LENGTH or any(char not in CODE_ALPHABET for char in code):
        raise InvalidCode(
            f"{_shown(raw)} is not a pairing code: codes are {CODE_LENGTH} characters from "
            f"{CODE_ALPHABET} (no I, O, 0 or 1), e.g. 7KQ2-MXHD; copy it from the sender's message"
        )
    return code
