"""Frames between ``nexo chat`` and the console channel server: one JSON object per line.

The console server listens on a Unix socket (mode 0600) in the state directory, so only the
operator's own account can talk to it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

MAX_FRAME_BYTES = 256 * 1024


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hello(_Frame):
    type: Literal["hello"] = "hello"
    chat_id: str = Field("operator", pattern=r"^[A-Za-z0-9_.:-]{1,64}$")


class Say(_Frame):
    type: Literal["say"] = "say"
    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    text: str = Field(min_length=1, max_length=64_000)


class Welcome(_Frame):
    type: Literal["welcome"] = "welcome"
    server: str
    chat_id: str


class Queued(_Frame):
    type: Literal["queued"] = "queued"
    id: str
    seq: int
    duplicate: bool = False


class Reply(_Frame):
    type: Literal["reply"] = "reply"
    message_id: str
    text: str
    reply_to: str | None = None
    notice: bool = False
    """A status line from nexo itself (provider down, budget hit), not the agent's answer."""


class Approval(_Frame):
    type: Literal["approval"] = "approval"
    request_id: str
    tool_name: str
    description: str
    input_preview: str


class Verdict(_Frame):
    type: Literal["verdict"] = "verdict"
    request_id: str
    behavior: Literal["allow", "deny"]


class Error(_Frame):
    type: Literal["error"] = "error"
    message: str


ClientFrame = Annotated[Hello | Say, Field(discriminator="type")]
ServerFrame = Annotated[Welcome | Queued | Reply | Approval | Verdict | Error, Field(discriminator="type")]
client_frames: TypeAdapter[Hello | Say] = TypeAdapter(ClientFrame)
server_frames: TypeAdapter[Welcome | Queued | Reply | Approval | Verdict | Error] = TypeAdapter(ServerFrame)


def encode(frame: BaseModel) -> bytes:
    return frame.model_dump_json().encode() + b"\n"
