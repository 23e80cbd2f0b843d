"""What an approval prompt shows: the whole call, nothing hidden by padding or invisible characters.

A prompt the operator answers must show everything that would run. The input is compact JSON
(``json.dumps`` already escapes newlines, tabs and the other C0 controls); on top of that, every
character a screen does not show as itself (DEL, C1 controls, format characters such as zero-width
spaces and bidi overrides, line and paragraph separators, spaces other than U+0020) is escaped as
``\\uXXXX``, and a run of four or more spaces or escapes is collapsed into a visible count. Only
when the result is still longer than a prompt can hold is the middle left out, and the prompt then
says how many characters it does not show.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

PROMPT_PREVIEW_CHARS = 3000
"""Longest input a prompt shows whole: with the tool's description it fits one Telegram message."""
_VISIBLE_SPACE = " "
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_RUN = re.compile(r"( |\\[nrtbf]|\\u[0-9a-fA-F]{4})\1{3,}")


def _escape_invisible(text: str) -> str:
    out: list[str] = []
    for char in text:
        if char != _VISIBLE_SPACE and unicodedata.category(char) in _INVISIBLE_CATEGORIES:
            out.append(f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}")
        else:
            out.append(char)
    return "".join(out)


def _collapse(match: re.Match[str]) -> str:
    unit = match[1]
    count = len(match[0]) // len(unit)
    name = "spaces" if unit == " " else f"x {unit}"
    return f"\u27e8{count} {name}\u27e9"


def visible(text: str) -> str:
    """``text`` with invisible characters escaped and long runs of blanks or escapes counted."""
    return _RUN.sub(_collapse, _escape_invisible(text))


def approval_preview(arguments: Mapping[str, Any], limit: int = PROMPT_PREVIEW_CHARS) -> str:
    """The whole input of a call as a person reads it, or its head and tail with the hidden length."""
    text = visible(
        json.dumps(arguments, separators=(",", ":"), ensure_ascii=False, sort_keys=True, default=str)
    )
    if len(text) <= limit:
        return text
    tail = limit // 3
    head = limit - tail
    hidden = len(text) - head - tail
    return (
        f"{text[:head]} \u27e8... {hidden} characters not shown: the input is too long for one prompt; "
        f"deny it unless you know what it does ...\u27e9 {text[-tail:]}"
    )


def origin_line(server: str | None, meta: Mapping[str, str], role: str) -> str:
    """Which chat and sender a goal serves, for the prompts its calls raise."""
    if server is None:
        return "not from a chat (a goal started by the operator or the agent itself)"
    chat = visible(meta.get("chat_id", "") or "-")
    sender = visible(meta.get("user_id", "") or meta.get("sender", "") or meta.get("principal", "") or "-")
    return f'{server} chat "{chat}", sender "{sender}" ({role})'
