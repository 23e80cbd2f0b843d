"""What a ledger source name may look like: one grammar for the side that makes names and the side
that checks them.

A source names who or what caused an entry: a word (``orchestrator``, ``cli``, ``heartbeat``) and up
to three qualifiers, each after a colon (``channel:console``, ``cron:c_ab12cd34ef``,
``cron:poller:main:inbox-check``). The orchestrator builds names with the functions below, and the
audit server accepts exactly what :func:`is_source` accepts, so a name one side makes is never
refused by the other.
"""

from __future__ import annotations

import re

SOURCE_WORD = r"[a-z][a-z0-9_-]{0,31}"
SOURCE_PART = r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}"
MAX_QUALIFIERS = 3
MAX_SOURCE = 200
SOURCE_RE = re.compile(rf"^{SOURCE_WORD}(?::{SOURCE_PART}){{0,{MAX_QUALIFIERS}}}$")
SOURCE_EXAMPLES = "'channel:console', 'cron:c_ab12cd34ef', 'cron:poller:main:inbox' or 'cli'"


def is_source(name: str) -> bool:
    """True when ``name`` is a source name the ledger accepts."""
    return len(name) <= MAX_SOURCE and SOURCE_RE.match(name) is not None


def source(word: str, *qualifiers: str) -> str:
    """The source ``word:q1:q2``; a ValueError naming the bad part when it would not be accepted."""
    name = ":".join((word, *qualifiers))
    if not is_source(name):
        raise ValueError(
            f"{name!r} is not a source name: a word ({SOURCE_WORD}) and up to {MAX_QUALIFIERS} "
            f"qualifiers ({SOURCE_PART}) joined by ':', {MAX_SOURCE} characters at most, "
            f"e.g. {SOURCE_EXAMPLES}"
        )
    return name


def channel_source(server: str) -> str:
    """The source of what a channel server carried: ``channel:<server>``."""
    return source("channel", server)


def cron_source(entry_id: str) -> str:
    """The source of a cron entry's fires: ``cron:<entry id>``; a poller's id has its own colons."""
    return source("cron", *entry_id.split(":"))
