"""HTML built from escaped pieces: every value is text unless it is already ``Markup``.

Content from contacts, channels, tools and the model is data: it goes through :func:`esc`, so a
message holding ``<script>`` renders as those characters. Only this module produces ``Markup`` from
a template, and templates are constants in the code.
"""

from __future__ import annotations

import html
from collections.abc import Iterable


class Markup(str):
    """HTML that is safe to send as is (built here from constants and escaped values)."""

    __slots__ = ()


def esc(value: object) -> Markup:
    """``value`` as HTML text: escaped, unless it is already ``Markup``."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def render(template: str, **values: object) -> Markup:
    """``template`` (a constant) with ``{name}`` fields filled by escaped ``values``."""
    return Markup(template.format(**{name: esc(value) for name, value in values.items()}))


def join(parts: Iterable[Markup]) -> Markup:
    return Markup("".join(esc(part) for part in parts))
