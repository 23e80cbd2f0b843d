"""The ``whatsapp_business_account`` webhook payload, read into what the channel acts on.

Only fields the Cloud API documents are read; anything else in the payload is ignored, and a
payload that is not the documented shape is :class:`Malformed` (answered 400, nothing stored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

MEDIA_KINDS: Final = frozenset({"image", "audio", "document", "video", "sticker"})


class Malformed(ValueError):
    """Not a webhook payload of the documented shape."""


@dataclass(frozen=True, slots=True)
class MediaRef:
    kind: str
    media_id: str
    mime_type: str
    caption: str
    file_name: str


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message from a contact. ``wa_id`` is the sender's platform id (stable, never typed in)."""

    message_id: str
    wa_id: str
    name: str
    timestamp: float
    kind: str
    text: str = ""
    button_id: str = ""
    media: MediaRef | None = None
    context_id: str = ""


@dataclass(frozen=True, slots=True)
class Status:
    """What became of a message the channel sent: sent, delivered, read or failed."""

    message_id: str
    status: str
    recipient: str
    error: str = ""


@dataclass(frozen=True, slots=True)
class Change:
    messages: tuple[Inbound, ...]
    statuses: tuple[Status, ...]


def _dict(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Malformed(f"{where} is not an object")
    return value


def _list(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(f"{where} is not a list")
    return value


def _str(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise Malformed(f"{where} is missing")
    return value


def _inbound(raw: object, names: dict[str, str]) -> Inbound:
    message = _dict(raw, "a message")
    wa_id = _str(message.get("from"), "message.from")
    kind = _str(message.get("type"), "message.type")
    timestamp = message.get("timestamp", "0")
    base: dict[str, Any] = {
        "message_id": _str(message.get("id"), "message.id"),
        "wa_id": wa_id,
        "name": names.get(wa_id, ""),
        "timestamp": float(timestamp) if isinstance(timestamp, str) and timestamp.isdigit() else 0.0,
        "kind": kind,
        "context_id": str(_dict(message.get("context", {}), "message.context").get("id", "")),
    }
    body = message.get(kind)
    if kind == "text":
        return Inbound(**base, text=_str(_dict(body, "message.text").get("body"), "text.body"))
    if kind == "interactive":
        interactive = _dict(body, "message.interactive")
        reply = interactive.get("button_reply") or interactive.get("list_reply")
        reply = _dict(reply, "interactive.button_reply")
        return Inbound(
            **base, text=str(reply.get("title", "")), button_id=_str(reply.get("id"), "button_reply.id")
        )
    if kind == "button":  # a template's quick-reply button
        button = _dict(body, "message.button")
        return Inbound(**base, text=str(button.get("text", "")), button_id=str(button.get("payload", "")))
    if kind in MEDIA_KINDS:
        media = _dict(body, f"message.{kind}")
        ref = MediaRef(
            kind=kind,
            media_id=_str(media.get("id"), f"{kind}.id"),
            mime_type=str(media.get("mime_type", "application/octet-stream")),
            caption=str(media.get("caption", "")),
            file_name=str(media.get("filename", "")),
        )
        return Inbound(**base, text=ref.caption, media=ref)
    return Inbound(**base)


def _status(raw: object) -> Status:
    status = _dict(raw, "a status")
    errors = _list(status.get("errors"), "status.errors")
    described = "; ".join(
        f"{error.get('code')} {error.get('title') or error.get('message', '')}".strip()
        for error in errors
        if isinstance(error, dict)
    )
    return Status(
        message_id=_str(status.get("id"), "status.id"),
        status=_str(status.get("status"), "status.status"),
        recipient=str(status.get("recipient_id", "")),
        error=described,
    )


def parse(document: object, phone_number_id: str) -> list[Change]:
    """The changes of a webhook for our phone number (others, e.g. a second number, are skipped)."""
    root = _dict(document, "the payload")
    if root.get("object") != "whatsapp_business_account":
        raise Malformed("the payload's object is not whatsapp_business_account")
    changes: list[Change] = []
    for entry in _list(root.get("entry"), "entry"):
        for change in _list(_dict(entry, "an entry").get("changes"), "entry.changes"):
            change = _dict(change, "a change")
            if change.get("field") != "messages":
                continue
            value = _dict(change.get("value"), "change.value")
            metadata = _dict(value.get("metadata", {}), "value.metadata")
            if str(metadata.get("phone_number_id", "")) != phone_number_id:
                continue
            names = {
                str(contact.get("wa_id")): str(_dict(contact.get("profile", {}), "profile").get("name", ""))
                for contact in _list(value.get("contacts"), "value.contacts")
                if isinstance(contact, dict)
            }
            messages = tuple(_inbound(m, names) for m in _list(value.get("messages"), "value.messages"))
            statuses = tuple(_status(s) for s in _list(value.get("statuses"), "value.statuses"))
            changes.append(Change(messages, statuses))
    return changes
