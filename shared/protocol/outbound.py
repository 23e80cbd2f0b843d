"""The arguments of a channel server's outbound tool (``send_message``), described once for all."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

TextArg = Annotated[str, Field(description="The message to send, as plain text.")]
ChatIdArg = Annotated[
    str,
    Field(description="The chat to send to: the chat_id of the <channel ...> tag you are answering."),
]
ReplyToArg = Annotated[
    str | None,
    Field(description="The message_id this answers, from the <channel ...> tag; omit for a new message."),
]
IdempotencyKeyArg = Annotated[
    str | None,
    Field(
        description=(
            "Any string unique to this message; a retry with the same key never sends twice. Omit it "
            "and every call sends a new message."
        ),
        examples=["reply-2026-11-25-ana-1"],
    ),
]
NoticeArg = Annotated[
    bool,
    Field(description="true marks a message from nexo itself (a limit or shutdown notice), not an answer."),
]
