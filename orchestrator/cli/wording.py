"""Server errors shown to a person: the names of tools and methods become ``nexo`` commands.

A server writes its refusals for the model that called it ("call memory_recall to find the id"),
and the same text reaches the operator when a ``nexo`` command hits it. ``common.fail``, which
every command reports its errors with, passes the message through :func:`for_person`, so the hint
names what a person can run instead of a tool they cannot call.
"""

from __future__ import annotations

import re

COMMAND_FOR: dict[str, str] = {
    "memory_recall": "nexo memory search",
    "memory_history": "nexo memory history",
    "memory_forget": "nexo memory forget",
    "nexo/memory/history": "nexo memory history",
    "cron_list": "nexo cron list",
    "nexo/cron/list": "nexo cron list",
    "cron_pause": "nexo cron pause",
    "cron_resume": "nexo cron resume",
    "cron_drop": "nexo cron drop",
    "nexo/audit/goals/list": "nexo agent ps --all",
    "nexo/pairing/list": "nexo pair list",
}
"""A tool or control-plane method named in a server's message, and the command a person runs."""

CALLED_ONLY: dict[str, str] = {"history": "nexo memory history"}
"""Short names that are tool names only after ``call`` ("call history to list revisions")."""

_CALLABLE = {**COMMAND_FOR, **CALLED_ONLY}


def _names(names: dict[str, str]) -> str:
    """One regex alternative per name, longest first, each a whole word (``/`` and ``_`` included)."""
    alternatives = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    return rf"(?<![\w/`])({alternatives})(?![\w/`])"


_CALL = re.compile(r"\bcall " + _names(_CALLABLE))
_NAMED = re.compile(_names(COMMAND_FOR) + r"(?: \(or " + _names(COMMAND_FOR) + r"\))?")


def for_person(message: str) -> str:
    """``message`` with each tool or method name replaced by the ``nexo`` command that does the same."""
    called = _CALL.sub(lambda match: f"run `{_CALLABLE[match.group(1)]}`", message)
    return _NAMED.sub(lambda match: f"`{COMMAND_FOR[match.group(1)]}`", called)
