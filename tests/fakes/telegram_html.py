"""Telegram's ``parse_mode=HTML`` rules, as the Bot API documents them, for the stand-in to enforce.

Supported tags: ``b strong i em u ins s strike del span(class="tg-spoiler") tg-spoiler a(href)
code pre blockquote(expandable) tg-emoji(emoji-id)``; every ``<``, ``>`` and ``&`` that is not part
of a tag or of an entity (``&lt; &gt; &amp; &quot;`` or numeric) must be escaped. A violation is
answered like Telegram does: ``Bad Request: can't parse entities: ...``. The length limit applies
to the text left after the markup is parsed, counted in UTF-16 code units.
"""

from __future__ import annotations

import html
import re

ALLOWED = frozenset(
    {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "code", "pre"}
    | {"blockquote", "tg-emoji"}
)
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z-]+(?:=(?:\"[^\"]*\"|'[^']*'|[^\s>]+))?)*)\s*>")
_ENTITY = re.compile(r"&(?:lt|gt|amp|quot|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6});")


class EntityError(ValueError):
    """The text cannot be parsed as Telegram HTML; the message is Telegram's own wording."""


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def parse_html(text: str) -> str:
    """The plain text Telegram shows for ``text``; raises :class:`EntityError` as Telegram would."""
    plain: list[str] = []
    stack: list[str] = []
    position = 0
    while position < len(text):
        char = text[position]
        if char == "<":
            match = _TAG.match(text, position)
            if match is None:
                raise EntityError(
                    f"can't parse entities: Unsupported start tag at byte offset {_offset(text, position)}"
                )
            closing, name, attributes = match.group(1), match.group(2).lower(), match.group(3)
            if name not in ALLOWED:
                raise EntityError(
                    f'can\'t parse entities: Unsupported start tag "{name}" at byte offset '
                    f"{_offset(text, position)}"
                )
            if closing:
                if not stack or stack[-1] != name:
                    raise EntityError(
                        f"can't parse entities: Unmatched end tag at byte offset {_offset(text, position)}, "
                        f'expected "</{stack[-1] if stack else ""}>", found "</{name}>"'
                    )
                stack.pop()
            else:
                if name == "span" and "tg-spoiler" not in attributes:
                    raise EntityError(
                        f'can\'t parse entities: Tag "span" must have class "tg-spoiler" at byte offset '
                        f"{_offset(text, position)}"
                    )
                stack.append(name)
            position = match.end()
        elif char == ">":
            raise EntityError(
                f"can't parse entities: Character '>' is reserved and must be escaped with \"&gt;\" "
                f"at byte offset {_offset(text, position)}"
            )
        elif char == "&":
            match = _ENTITY.match(text, position)
            if match is None:
                raise EntityError(
                    f"can't parse entities: Character '&' must be escaped with \"&amp;\" at byte offset "
                    f"{_offset(text, position)}"
                )
            plain.append(html.unescape(match.group(0)))
            position = match.end()
        else:
            plain.append(char)
            position += 1
    if stack:
        raise EntityError(
            f"can't parse entities: Can't find end tag corresponding to start tag \"{stack[-1]}\""
        )
    return "".join(plain)


def _offset(text: str, position: int) -> int:
    return len(text[:position].encode())
