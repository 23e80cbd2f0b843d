"""What the agent's own messages may not look like: an approval prompt, or a message from nobody.

Approval prompts reach the operator only through the permission relay. A goal driven by a contact's
message could otherwise have the model post ``[approval kmpqr] notes__read {}`` into the operator's
chat, with the id of a real pending request whose actual call is something else, and the operator's
``yes kmpqr`` would approve that. So text the agent sends through its channel tools is refused when
it carries the prompt's marker or names a request that is waiting for an answer, and a message to
the operator sent while serving a contact says whose conversation it comes from.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection

from orchestrator.permissions import origin_line
from orchestrator.tools.local import GoalContext, LocalToolError

_PROMPT_MARKER = re.compile(r"\[\s*(approval|permission)\b", re.IGNORECASE)


_LOOKALIKES = str.maketrans(
    # Cyrillic and Greek letters drawn like Latin ones: "[аpprоval kmрqr]" reads as the real thing.
    "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u04cf\u0501\u051b\u051d"
    "\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0406"
    "\u03bf\u03c1\u03b1\u03bd\u03b9\u039f\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d"
    "\u03a1\u03a4\u03a7",
    "aeopcyxijsldqwABEKMHOPCTXIopavioABEZHIKMNPTX",
)


def _readable(text: str) -> str:
    """The text as a reader sees it: compatibility forms folded (fullwidth brackets and letters),
    Cyrillic and Greek look-alikes read as the Latin letters they imitate, format characters
    (zero-width spaces, bidi controls) dropped."""
    folded = unicodedata.normalize("NFKC", text).translate(_LOOKALIKES)
    return "".join(c for c in folded if unicodedata.category(c) != "Cf")


def refuse_prompt_lookalike(text: str, open_requests: Collection[str]) -> None:
    """Raise ``LocalToolError`` when ``text`` imitates an approval prompt or names a pending request."""
    readable = _readable(text)
    if marker := _PROMPT_MARKER.search(readable):
        raise LocalToolError(
            f"the message contains {marker[0]!r}, the marker of approval prompts; only nexo's approval "
            "relay shows prompts. Describe what you need in your own words, without that marker"
        )
    words = set(re.findall(r"[a-z]+", readable.lower()))
    if named := sorted(words.intersection(open_requests)):
        raise LocalToolError(
            f"the message names {named[0]!r}, a request waiting for the operator's answer; only nexo's "
            "approval relay asks about it. Leave the request id out"
        )


def labelled_for_operator(context: GoalContext, text: str) -> str:
    """``text`` prefixed with the conversation it comes from when the goal serves a contact."""
    if context.origin_server is None or context.origin_role == "owner":
        return text
    origin = origin_line(context.origin_server, context.origin_meta, context.origin_role or "contact")
    return f"[while serving {origin}] {text}"
