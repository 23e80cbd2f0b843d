"""A model's Markdown reply made fit for a platform: split to its length limit, rendered to its markup.

Pure functions, no I/O. Every platform sends the parts of ``split_markdown(reply, limit)`` in order,
each rendered with the function for its markup (``to_telegram_html``, ``to_whatsapp``,
``to_slack_mrkdwn``), and falls back
to ``to_plain`` when the platform rejects the formatting.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from shared.channelkit.markdown import (
    FENCE_OPEN,
    Block,
    Code,
    Fenced,
    Inline,
    InlineStyle,
    Line,
    Styled,
    Text,
    is_fence_close,
    parse_blocks,
)

__all__ = ["split_markdown", "to_plain", "to_slack_mrkdwn", "to_telegram_html", "to_whatsapp"]

TELEGRAM_LINK_SCHEMES: Final = ("http://", "https://", "tg://", "mailto:")

_INLINE_SPANS: Final = (
    re.compile(r"(`+)(?:(?!\n\n).)+?\1", re.DOTALL),
    re.compile(r"\[[^\[\]\n]+\]\([^()\s]+\)"),
    re.compile(r"\*\*(?=\S)[^\n]*?(?<=\S)\*\*"),
    re.compile(r"__(?=\S)[^\n]*?(?<=\S)__"),
    re.compile(r"~~(?=\S)[^\n]*?(?<=\S)~~"),
    re.compile(r"(?<![*\w])\*(?=[^\s*])[^*\n]*?(?<=[^\s*])\*(?!\*)"),
    re.compile(r"(?<![_\w])_(?=[^\s_])[^_\n]*?(?<=[^\s_])_(?![_\w])"),
)
_SENTENCE_END: Final = re.compile(r"[.!?…](?=\s)")


@dataclass(frozen=True, slots=True)
class _Fence:
    opening: str
    """The opening line as written (fence and language), repeated to reopen the block."""
    closing: str
    content_start: int
    close_start: int
    """Where the closing line starts (the text's end when the block is never closed)."""
    end: int


class _Layout:
    """Where a cut may fall in ``text``: the fenced blocks and the inline spans never to cut through."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.fences = _fences(text)
        self.protected = bytearray(len(text) + 1)
        masked = list(text)
        for fence in self.fences:
            opening_start = fence.content_start - len(fence.opening) - 1
            # up to the first code character: a part never ends on a bare opening fence
            self._protect(max(opening_start, 0), fence.content_start + 1)
            self._protect(fence.close_start, fence.end)
            masked[max(opening_start, 0) : fence.end] = "\n" * (fence.end - max(opening_start, 0))
        outside = "".join(masked)
        for pattern in _INLINE_SPANS:
            for match in pattern.finditer(outside):
                self._protect(match.start(), match.end())

    def _protect(self, start: int, end: int) -> None:
        for position in range(start + 1, end):
            self.protected[position] = 1

    def fence_at(self, position: int) -> _Fence | None:
        """The fenced block whose code ``position`` is in (its closing line's start included)."""
        for fence in self.fences:
            if fence.content_start <= position <= fence.close_start:
                return fence
        return None


def _fences(text: str) -> list[_Fence]:
    fences: list[_Fence] = []
    offset = 0
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        offset += len(line) + 1
        index += 1
        opening = FENCE_OPEN.match(line)
        if opening is None:
            continue
        marker = opening["fence"]
        content_start = min(offset, len(text))
        while index < len(lines) and not is_fence_close(lines[index], marker):
            offset += len(lines[index]) + 1
            index += 1
        if index < len(lines):
            close_start = offset
            offset += len(lines[index]) + 1
            index += 1
            end = min(offset - 1, len(text))
        else:
            close_start = end = len(text)
        fences.append(_Fence(line.strip(), marker, content_start, close_start, end))
    return fences


def split_markdown(text: str, limit: int) -> list[str]:
    """Cut ``text`` into ordered non-empty parts of at most ``limit`` characters each.

    Cuts fall at the last paragraph break that fits, else line break, sentence end, space, else
    anywhere; never inside an inline span (code, emphasis, link) when another cut fits. A fenced
    code block cut across parts is closed at the end of one and reopened, same language, at the
    start of the next; those fences count in the limit.
    """
    if limit < 1:
        raise ValueError(f"limit {limit!r} must be at least 1 character")
    layout = _Layout(text)
    parts: list[str] = []
    start = _skip_space(layout, 0)
    while start < len(text) and text[start:].strip():
        part, start = _next_part(layout, start, limit)
        if part:
            parts.append(part)
        start = _skip_space(layout, start)
    return parts


def _skip_space(layout: _Layout, position: int) -> int:
    text = layout.text
    while position < len(text) and text[position].isspace():
        fence = layout.fence_at(position)
        if fence is not None and text[position] != "\n" and position < fence.close_start:
            break  # indentation of a code line is part of the code
        position += 1
    return position


def _render_part(layout: _Layout, start: int, cut: int) -> str | None:
    body = layout.text[start:cut].rstrip()
    if not body.strip():
        return None
    opened = layout.fence_at(start)
    if opened is not None and start < opened.close_start:
        body = f"{opened.opening}\n{body}"
    closing = layout.fence_at(cut)
    if closing is not None:
        body = f"{body}\n{closing.closing}"
    return body


def _next_part(layout: _Layout, start: int, limit: int) -> tuple[str, int]:
    text = layout.text
    whole = _render_part(layout, start, len(text))
    if whole is not None and len(whole) <= limit:
        return whole, len(text)
    window_end = min(len(text), start + limit)
    fallback: tuple[str, int] | None = None
    for cut in _candidates(text, start, window_end):
        if cut <= start:
            continue
        part = _render_part(layout, start, cut)
        if part is None or len(part) > limit or _reopens_at_close(layout, cut):
            continue
        if not layout.protected[cut]:
            return part, cut
        if fallback is None:
            fallback = part, cut
    if fallback is not None:
        return fallback
    return _hard_cut(layout, start, limit)


def _reopens_at_close(layout: _Layout, cut: int) -> bool:
    """A cut whose next part would begin on a closing fence (which would read as an opening one)."""
    following = _skip_space(layout, cut)
    return any(fence.close_start == following < fence.end for fence in layout.fences)


def _candidates(text: str, start: int, end: int) -> list[int]:
    window = text[start:end]
    ordered: list[int] = []
    ordered += [start + m.start() for m in reversed(list(re.finditer(r"\n[ \t]*\n", window)))]
    ordered += [start + i for i in range(len(window) - 1, -1, -1) if window[i] == "\n"]
    ordered += [start + m.end() for m in reversed(list(_SENTENCE_END.finditer(window)))]
    ordered += [start + i for i in range(len(window) - 1, -1, -1) if window[i] in " \t"]
    ordered += list(range(end, start, -1))
    return ordered


def _hard_cut(layout: _Layout, start: int, limit: int) -> tuple[str, int]:
    """No cut fits once the fences are counted (a tiny limit): cut the bare text at ``limit``."""
    cut = start + limit
    return layout.text[start:cut].rstrip(), cut


def _escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_attribute(text: str) -> str:
    return _escape_html(text).replace('"', "&quot;")


_HTML_TAGS: Final[dict[InlineStyle, str]] = {"bold": "b", "italic": "i", "strike": "s"}
# WhatsApp and Slack mark styles with the same single characters.
_MARKS: Final[dict[InlineStyle, str]] = {"bold": "*", "italic": "_", "strike": "~"}


def _telegram_inline(nodes: Sequence[Inline]) -> str:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, Text):
            out.append(_escape_html(node.text))
        elif isinstance(node, Code):
            out.append(f"<code>{_escape_html(node.code)}</code>")
        elif isinstance(node, Styled):
            tag = _HTML_TAGS[node.style]
            out.append(f"<{tag}>{_telegram_inline(node.children)}</{tag}>")
        elif node.url.lower().startswith(TELEGRAM_LINK_SCHEMES):
            out.append(f'<a href="{_escape_attribute(node.url)}">{_telegram_inline(node.children)}</a>')
        else:
            out.append(_escape_html(node.source))
    return "".join(out)


def _linked(children: str, url: str) -> str:
    return url if children == url else f"{children} ({url})"


def _whatsapp_inline(nodes: Sequence[Inline]) -> str:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.text)
        elif isinstance(node, Code):
            out.append(f"`{node.code}`")
        elif isinstance(node, Styled):
            mark = _MARKS[node.style]
            out.append(f"{mark}{_whatsapp_inline(node.children)}{mark}")
        else:
            out.append(_linked(_whatsapp_inline(node.children), node.url))
    return "".join(out)


def _plain_inline(nodes: Sequence[Inline]) -> str:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.text)
        elif isinstance(node, Code):
            out.append(node.code)
        elif isinstance(node, Styled):
            out.append(_plain_inline(node.children))
        else:
            out.append(_linked(_plain_inline(node.children), node.url))
    return "".join(out)


def _render(
    blocks: Sequence[Block],
    inline: Callable[[Sequence[Inline]], str],
    line: Callable[[Line, str], str],
    fenced: Callable[[Fenced], str],
    quote: Callable[[list[str]], str],
) -> str:
    out: list[str] = []
    quoted: list[str] = []
    for block in blocks:
        if isinstance(block, Line) and block.kind == "quote":
            quoted.append(inline(block.inlines))
            continue
        if quoted:
            out.append(quote(quoted))
            quoted = []
        out.append(fenced(block) if isinstance(block, Fenced) else line(block, inline(block.inlines)))
    if quoted:
        out.append(quote(quoted))
    return "\n".join(out)


def _list_line(block: Line, body: str, bullet: str) -> str:
    if block.kind == "bullet":
        return f"{block.indent}{bullet} {body}"
    if block.kind == "numbered":
        return f"{block.indent}{block.marker} {body}"
    return body


def to_telegram_html(md: str) -> str:
    """Markdown to Telegram's HTML parse mode: only tags Telegram accepts, always balanced."""

    def line(block: Line, body: str) -> str:
        return f"<b>{body}</b>" if block.kind == "heading" and body else _list_line(block, body, "•")

    def fenced(block: Fenced) -> str:
        code = _escape_html(block.code)
        if block.language:
            language = _escape_attribute(block.language)
            return f'<pre><code class="language-{language}">{code}</code></pre>'
        return f"<pre>{code}</pre>"

    def quote(lines: list[str]) -> str:
        return "<blockquote>" + "\n".join(lines) + "</blockquote>"

    return _render(parse_blocks(md), _telegram_inline, line, fenced, quote)


def to_whatsapp(md: str) -> str:
    """Markdown to WhatsApp's markup: *bold*, _italic_, ~strike~, ```mono```, `inline`, > quote, - list."""

    def line(block: Line, body: str) -> str:
        return f"*{body}*" if block.kind == "heading" and body else _list_line(block, body, "-")

    def fenced(block: Fenced) -> str:
        return f"```\n{block.code}\n```"

    def quote(lines: list[str]) -> str:
        return "\n".join(f"> {text}" for text in lines)

    return _render(parse_blocks(md), _whatsapp_inline, line, fenced, quote)


def to_plain(md: str) -> str:
    """Markdown as readable plain text: markers removed, a link as "text (url)"."""

    def line(block: Line, body: str) -> str:
        return _list_line(block, body, "-")

    def fenced(block: Fenced) -> str:
        return block.code

    def quote(lines: list[str]) -> str:
        return "\n".join(f"> {text}" for text in lines)

    return _render(parse_blocks(md), _plain_inline, line, fenced, quote)


# Slack escapes &, < and > the way HTML does, and nothing else.
SLACK_LINK_SCHEMES: Final = ("http://", "https://", "mailto:")


def _slack_inline(nodes: Sequence[Inline]) -> str:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, Text):
            out.append(_escape_html(node.text))
        elif isinstance(node, Code):
            out.append(f"`{_escape_html(node.code)}`")
        elif isinstance(node, Styled):
            mark = _MARKS[node.style]
            out.append(f"{mark}{_slack_inline(node.children)}{mark}")
        elif node.url.lower().startswith(SLACK_LINK_SCHEMES) and not any(c in node.url for c in "<>|"):
            label = _slack_inline(node.children).replace("|", "¦")
            out.append(f"<{_escape_html(node.url)}|{label}>")
        else:
            out.append(_escape_html(node.source))
    return "".join(out)


def to_slack_mrkdwn(md: str) -> str:
    """Markdown to Slack's mrkdwn: *bold*, _italic_, ~strike~, `code`, ```block```, <url|text>, > quote.

    ``&``, ``<`` and ``>`` are escaped, so a message cannot mention ``<!channel>`` or a user."""

    def line(block: Line, body: str) -> str:
        return f"*{body}*" if block.kind == "heading" and body else _list_line(block, body, "•")

    def fenced(block: Fenced) -> str:
        return f"```\n{_escape_html(block.code)}\n```"

    def quote(lines: list[str]) -> str:
        return "\n".join(f"> {text}" for text in lines)

    return _render(parse_blocks(md), _slack_inline, line, fenced, quote)
