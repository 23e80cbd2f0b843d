"""Frames between ``nexo chat`` and the console channel server: one JSON object per line.

The console server listens on a Unix socket (mode 0600) in the state directory, so only the
operator's own account can talk to it.

Plain slotted classes checked by hand rather than pydantic models or dataclasses: ``nexo chat``
imports this module, and a one-shot command should pay neither for building validators nor for the
code generation of ``dataclasses`` (docs/console.md). Decoding is as strict as a model that forbids
extra keys: every field is type-checked, patterns and lengths are enforced, and a bad frame raises
:class:`FrameError` naming the field. :class:`LineSplitter` is the framing both ends of ``nexo
chat`` use (the blocking client and the one inside ``nexo run --chat``).
"""

from __future__ import annotations

import json
import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing at run time costs a one-shot command
    from typing import Any, ClassVar, Final, Literal

MAX_FRAME_BYTES = 256 * 1024
MAX_SAY_CHARS: Final = 64_000
CHAT_ID: Final = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
MESSAGE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")

_STR = (str,)
_INT = (int,)
_BOOL = (bool,)
_OPTIONAL_STR = (str, type(None))
_REQUIRED = object()
"""The default of a field a frame must carry."""


class FrameError(ValueError):
    """A line that is not a valid frame; the message names what is wrong."""


class FrameTooLong(FrameError):
    """More than :data:`MAX_FRAME_BYTES` without a newline."""


class _Frame:
    """Equality, hashing and ``repr`` by field, like a frozen dataclass; ``FIELDS`` drives decoding."""

    __slots__ = ()
    TYPE: ClassVar[str]
    FIELDS: ClassVar[tuple[tuple[str, tuple[type, ...], object], ...]]
    """Each field's name, the JSON types it may have, and its default (``_REQUIRED`` if none)."""

    @property
    def type(self) -> str:
        return self.TYPE

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.TYPE, **{name: getattr(self, name) for name, _, _ in self.FIELDS}}

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, _Frame)
        return self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(self.as_dict().values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name, _, _ in self.FIELDS)
        return f"{self.__class__.__name__}({fields})"


class Hello(_Frame):
    __slots__ = ("chat_id",)
    TYPE = "hello"
    FIELDS = (("chat_id", _STR, "operator"),)

    def __init__(self, *, chat_id: str = "operator") -> None:
        _match(CHAT_ID, "chat_id", chat_id)
        self.chat_id = chat_id


class Say(_Frame):
    __slots__ = ("id", "text")
    TYPE = "say"
    FIELDS = (("id", _STR, _REQUIRED), ("text", _STR, _REQUIRED))

    def __init__(self, *, id: str, text: str) -> None:
        _match(MESSAGE_ID, "id", id)
        if not 1 <= len(text) <= MAX_SAY_CHARS:
            raise FrameError(f"text: must be 1 to {MAX_SAY_CHARS} characters, not {len(text)}")
        self.id = id
        self.text = text


class Welcome(_Frame):
    __slots__ = ("chat_id", "server")
    TYPE = "welcome"
    FIELDS = (("server", _STR, _REQUIRED), ("chat_id", _STR, _REQUIRED))

    def __init__(self, *, server: str, chat_id: str) -> None:
        self.server = server
        self.chat_id = chat_id


class Queued(_Frame):
    __slots__ = ("duplicate", "id", "seq")
    TYPE = "queued"
    FIELDS = (("id", _STR, _REQUIRED), ("seq", _INT, _REQUIRED), ("duplicate", _BOOL, False))

    def __init__(self, *, id: str, seq: int, duplicate: bool = False) -> None:
        self.id = id
        self.seq = seq
        self.duplicate = duplicate


class Reply(_Frame):
    """``notice``: a status line from nexo itself (provider down, budget hit), not the agent's answer."""

    __slots__ = ("message_id", "notice", "reply_to", "text")
    TYPE = "reply"
    FIELDS = (
        ("message_id", _STR, _REQUIRED),
        ("text", _STR, _REQUIRED),
        ("reply_to", _OPTIONAL_STR, None),
        ("notice", _BOOL, False),
    )

    def __init__(
        self, *, message_id: str, text: str, reply_to: str | None = None, notice: bool = False
    ) -> None:
        self.message_id = message_id
        self.text = text
        self.reply_to = reply_to
        self.notice = notice


class Approval(_Frame):
    __slots__ = ("description", "input_preview", "request_id", "tool_name")
    TYPE = "approval"
    FIELDS = (
        ("request_id", _STR, _REQUIRED),
        ("tool_name", _STR, _REQUIRED),
        ("description", _STR, _REQUIRED),
        ("input_preview", _STR, _REQUIRED),
    )

    def __init__(self, *, request_id: str, tool_name: str, description: str, input_preview: str) -> None:
        self.request_id = request_id
        self.tool_name = tool_name
        self.description = description
        self.input_preview = input_preview


class Verdict(_Frame):
    __slots__ = ("behavior", "request_id")
    TYPE = "verdict"
    FIELDS = (("request_id", _STR, _REQUIRED), ("behavior", _STR, _REQUIRED))

    def __init__(self, *, request_id: str, behavior: Literal["allow", "deny"]) -> None:
        if behavior not in ("allow", "deny"):
            raise FrameError(f"behavior: must be 'allow' or 'deny', not {behavior!r}")
        self.request_id = request_id
        self.behavior: Literal["allow", "deny"] = behavior


class Error(_Frame):
    __slots__ = ("message",)
    TYPE = "error"
    FIELDS = (("message", _STR, _REQUIRED),)

    def __init__(self, *, message: str) -> None:
        self.message = message


ClientFrame = Hello | Say
ServerFrame = Welcome | Queued | Reply | Approval | Verdict | Error
Frame = ClientFrame | ServerFrame


class _Decoder:
    """Decodes one line into one of ``kinds``, chosen by its ``type`` key."""

    def __init__(self, *kinds: type[_Frame]) -> None:
        self._kinds = {kind.TYPE: kind for kind in kinds}

    def decode(self, line: bytes | str) -> Any:
        try:
            data = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            raise FrameError(f"not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise FrameError("a frame is a JSON object")
        kind = self._kinds.get(data.get("type"))  # type: ignore[arg-type]
        if kind is None:
            raise FrameError(
                f"type: must be one of {', '.join(sorted(self._kinds))}, not {data.get('type')!r}"
            )
        names = {name for name, _, _ in kind.FIELDS}
        if extra := sorted(set(data) - names - {"type"}):
            raise FrameError(f"{extra[0]}: unknown field of a {kind.TYPE} frame")
        values: dict[str, Any] = {}
        for name, allowed, default in kind.FIELDS:
            if name not in data:
                if default is _REQUIRED:
                    raise FrameError(f"{name}: missing from a {kind.TYPE} frame")
                continue
            value = data[name]
            # bool is an int subclass in Python; in JSON they are different types.
            if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
                raise FrameError(f"{name}: wrong type {type(value).__name__}")
            values[name] = value
        return kind(**values)


def _match(pattern: re.Pattern[str], name: str, value: object) -> None:
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        raise FrameError(f"{name}: must match {pattern.pattern}, not {value!r}")


_client = _Decoder(Hello, Say)
_server = _Decoder(Welcome, Queued, Reply, Approval, Verdict, Error)


def decode_client(line: bytes | str) -> ClientFrame:
    """A frame from ``nexo chat``; raises :class:`FrameError`."""
    frame: ClientFrame = _client.decode(line)
    return frame


def decode_server(line: bytes | str) -> ServerFrame:
    """A frame from the console server; raises :class:`FrameError`."""
    frame: ServerFrame = _server.decode(line)
    return frame


def encode(frame: Frame) -> bytes:
    return json.dumps(frame.as_dict(), ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class LineSplitter:
    """Bytes as they arrive, cut into complete lines (without the newline).

    ``limit`` bounds a line still waiting for its newline: past it, :class:`FrameTooLong` (a frame is
    at most :data:`MAX_FRAME_BYTES`); None for a terminal, whose lines a person types.
    """

    def __init__(self, limit: int | None = MAX_FRAME_BYTES) -> None:
        self.limit = limit
        self._pending = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        if self.limit is not None and len(self._pending) > self.limit:
            raise FrameTooLong(f"a line longer than {self.limit} bytes")
        return lines

    def rest(self) -> bytes:
        """What came after the last newline (the input ended without one)."""
        rest, self._pending = self._pending, b""
        return rest
