"""Frames between ``nexo chat`` and the console channel server: one JSON object per line.

The console server listens on a Unix socket (mode 0600) in the state directory, so only the
operator's own account can talk to it.

Plain dataclasses checked by hand rather than pydantic models: ``nexo chat`` imports this module,
and a one-shot command should not pay for building validators (docs/console.md). Decoding is
as strict as a model that forbids extra keys: every field is type-checked, patterns and lengths are
enforced, and a bad frame raises :class:`FrameError` naming the field.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal, TypeAlias

MAX_FRAME_BYTES = 256 * 1024
MAX_SAY_CHARS: Final = 64_000
CHAT_ID: Final = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
MESSAGE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


class FrameError(ValueError):
    """A line that is not a valid frame; the message names what is wrong."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hello:
    type: Literal["hello"] = "hello"
    chat_id: str = "operator"

    def __post_init__(self) -> None:
        _match(CHAT_ID, "chat_id", self.chat_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Say:
    type: Literal["say"] = "say"
    id: str
    text: str

    def __post_init__(self) -> None:
        _match(MESSAGE_ID, "id", self.id)
        if not 1 <= len(self.text) <= MAX_SAY_CHARS:
            raise FrameError(f"text: must be 1 to {MAX_SAY_CHARS} characters, not {len(self.text)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Welcome:
    type: Literal["welcome"] = "welcome"
    server: str
    chat_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Queued:
    type: Literal["queued"] = "queued"
    id: str
    seq: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    type: Literal["reply"] = "reply"
    message_id: str
    text: str
    reply_to: str | None = None
    notice: bool = False
    """A status line from nexo itself (provider down, budget hit), not the agent's answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    type: Literal["approval"] = "approval"
    request_id: str
    tool_name: str
    description: str
    input_preview: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    type: Literal["verdict"] = "verdict"
    request_id: str
    behavior: Literal["allow", "deny"]

    def __post_init__(self) -> None:
        if self.behavior not in ("allow", "deny"):
            raise FrameError(f"behavior: must be 'allow' or 'deny', not {self.behavior!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Error:
    type: Literal["error"] = "error"
    message: str


ClientFrame: TypeAlias = Hello | Say
ServerFrame: TypeAlias = Welcome | Queued | Reply | Approval | Verdict | Error
Frame: TypeAlias = ClientFrame | ServerFrame


class _Decoder:
    """Decodes one line into one of ``kinds``, chosen by its ``type`` key."""

    _FIELD_TYPES: ClassVar[dict[str, tuple[type, ...]]] = {
        "str": (str,),
        "int": (int,),
        "bool": (bool,),
        "str | None": (str, type(None)),
    }

    def __init__(self, *kinds: type[Any]) -> None:
        self._kinds = {_type_of(kind): kind for kind in kinds}

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
        fields = {field.name: field for field in dataclasses.fields(kind)}
        if extra := sorted(set(data) - set(fields)):
            raise FrameError(f"{extra[0]}: unknown field of a {data['type']} frame")
        for name, field in fields.items():
            if name not in data:
                if field.default is dataclasses.MISSING:
                    raise FrameError(f"{name}: missing from a {data['type']} frame")
                continue
            value = data[name]
            allowed = self._FIELD_TYPES.get(str(field.type), (str,))
            # bool is an int subclass in Python; in JSON they are different types.
            if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
                raise FrameError(f"{name}: wrong type {type(value).__name__}")
        return kind(**data)


def _type_of(kind: type[Any]) -> str:
    (field,) = (field for field in dataclasses.fields(kind) if field.name == "type")
    return str(field.default)


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
    return json.dumps(dataclasses.asdict(frame), ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
